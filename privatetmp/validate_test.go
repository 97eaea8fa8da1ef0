package privatetmp

// validateFile checks that path is a regular file (not a link), mode
// exactly 0600, owned by this process's effective uid.
func validateFile(path string) error { return validate(path, false) }
