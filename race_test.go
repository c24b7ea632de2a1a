//go:build race

package admit_test

// raceEnabled reports that the tests run with the race detector, under which sync.Pool drops what
// it is given at random: the KeyBuilder's digesters are then made anew, and allocation counts grow.
const raceEnabled = true
