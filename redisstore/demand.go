package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
)

// The demand records of Envoy's Rate Limit Quota Service (transport/rlqs): one hash per bucket,
// under DemandPrefix, with the commands of ACLRules only.
//
//go:embed scripts/demand.lua
var demandSrc string

var demandScript = newScript("demand", demandSrc)

// DemandPrefix begins the key of every bucket's demand records: rl:rlqs:{<digest>}.
const DemandPrefix = "rl:rlqs:"

// ReportDemand records demand (requests per second) of client for bucket until now+ttl, drops the
// records expired at now, and returns every live client's demand, client's included, in one
// script: transport/rlqs's Ledger, shared by every admit instance on this Redis. bucket is a
// digest (a bounded name of letters and digits); the instances' clocks must agree within the TTL.
// A failure is an error matching admit.ErrUnavailable.
func (s *Store) ReportDemand(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) (map[string]float64, error) {
	return s.demand(ctx, bucket, client, demand, now, ttl, false)
}

// LeaveDemand removes client's record of bucket (its stream ended): transport/rlqs's Ledger.
func (s *Store) LeaveDemand(ctx context.Context, bucket, client string) error {
	_, err := s.demand(ctx, bucket, client, 0, time.Now(), 0, true)
	return err
}

func (s *Store) demand(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration, leave bool) (map[string]float64, error) {
	if bucket == "" || client == "" || demand < 0 || ttl < 0 {
		return nil, fmt.Errorf("redisstore: demand: want a bucket, a client, a demand and a TTL of 0 or more")
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	l := "0"
	if leave {
		l = "1"
	}
	msg, err := s.run(ctx, demandScript, []string{DemandPrefix + "{" + bucket + "}"}, []string{
		client, strconv.FormatFloat(demand, 'g', -1, 64), strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(max(ttl.Milliseconds(), 1), 10), l,
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: demand: %w", err)
	}
	items, err := msg.AsStrSlice()
	if err != nil || len(items)%2 != 0 {
		return nil, fmt.Errorf("redisstore: demand: unexpected reply %v: %w", msg, err)
	}
	out := make(map[string]float64, len(items)/2)
	for i := 0; i < len(items); i += 2 {
		d, err := strconv.ParseFloat(items[i+1], 64)
		if err != nil {
			continue // a record that is not ours: not counted
		}
		out[items[i]] = d
	}
	return out, nil
}
