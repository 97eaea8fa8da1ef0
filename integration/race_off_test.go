//go:build !race

package integration

// raceDetector is false outside a -race build (see race_on_test.go).
const raceDetector = false
