# known: UserWarning: careful
import warnings
warnings.warn("careful")
print("warned")
