module example.com/hostinit

go 1.26.0

require github.com/executecode/executecode v0.0.0
