//go:build race

package integration

// raceDetector is true in a -race build, whose shadow memory makes the
// resident set grow with whatever the program ever touched: a leak shows
// in the live heap there, not in RSS.
const raceDetector = true
