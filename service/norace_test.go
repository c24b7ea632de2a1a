//go:build !race

package service_test

// raceSlack is 0 without the race detector: allocation counts are exact (race_test.go).
func raceSlack() float64 { return 0 }
