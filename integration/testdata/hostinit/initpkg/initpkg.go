// Package initpkg stands for any host dependency whose import path sorts
// before the runtime's: its init must run in the host alone.
package initpkg

import (
	"fmt"
	"os"
	"strconv"
)

func init() {
	fmt.Println("hostinit: init ran")
	fmt.Fprintln(os.Stderr, "hostinit: init ran")
	name := os.Getenv("HOSTINIT_PIDS")
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
}
