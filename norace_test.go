//go:build !race

package admit_test

// raceEnabled reports that the tests run with the race detector (race_test.go).
const raceEnabled = false
