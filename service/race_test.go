//go:build race

package service_test

// raceSlack is how many more allocations an allocation count may show under the race detector,
// under which sync.Pool drops what it is given at random: a decision's digesters (one a key).
func raceSlack() float64 { return 2 }
