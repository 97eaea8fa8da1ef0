package executecode

import "time"

// SetReapInterval makes the registry of r look for idle kernels every d
// instead of every minute; call it before the first session.
func SetReapInterval(r *Runtime, d time.Duration) { r.reapInterval = d }
