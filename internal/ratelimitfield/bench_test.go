package ratelimitfield_test

import (
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/ratelimitfield"
)

// benchFieldCases are the Decisions the field benchmarks write: one policy with a typical r and t,
// and one with the most digits a field has (r capped at 15 digits, as a bound.MaxRate policy's).
var benchFieldCases = []struct {
	name string
	d    admit.Decision
}{
	{"r=997", admit.Decision{Allowed: true, Limit: admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 1000, Period: time.Minute}, Remaining: 997, ResetAfter: 42 * time.Second}},
	{"r=15digits", admit.Decision{Allowed: true, Limit: admit.Limit{Name: "bench", Algorithm: admit.FixedWindow, Rate: bound.MaxRate, Period: time.Hour}, Remaining: bound.MaxRate - 1, ResetAfter: time.Hour}},
}

// BenchmarkFieldsAppendRateLimit measures Fields.AppendRateLimit, what the middleware writes for
// every response, against BenchmarkReferenceAppendRateLimit.
func BenchmarkFieldsAppendRateLimit(b *testing.B) {
	for _, tc := range benchFieldCases {
		b.Run(tc.name, func(b *testing.B) {
			f, _ := ratelimitfield.NewFields([]admit.Limit{tc.d.Limit})
			ds := []admit.Decision{tc.d}
			var buf [128]byte
			for b.Loop() {
				f.AppendRateLimit(buf[:0], ds, 0)
			}
		})
	}
}

// BenchmarkReferenceAppendRateLimit is the reference for BenchmarkFieldsAppendRateLimit: the
// function AppendRateLimit, which serializes each name and writes the integers with strconv.
func BenchmarkReferenceAppendRateLimit(b *testing.B) {
	for _, tc := range benchFieldCases {
		b.Run(tc.name, func(b *testing.B) {
			limits, ds := []admit.Limit{tc.d.Limit}, []admit.Decision{tc.d}
			var buf [128]byte
			for b.Loop() {
				ratelimitfield.AppendRateLimit(buf[:0], limits, ds, 0)
			}
		})
	}
}
