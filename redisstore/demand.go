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

// demandBorn is the field of a bucket's hash that holds its birth time; no client may be named so.
const demandBorn = "~born"

// ReportDemand records demand (requests per second) of client for bucket until now+ttl, drops the
// records expired at now, and returns every live client's demand, client's included, and the time
// the bucket's records were born (the first written while none was live: now, for a Redis emptied
// or a new fleet), in one script: transport/rlqs's Ledger, shared by every admit instance on this
// Redis. bucket is a digest (a bounded name of letters and digits); the instances' clocks must
// agree within the TTL. A failure is an error matching admit.ErrUnavailable.
func (s *Store) ReportDemand(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) (map[string]float64, time.Time, error) {
	return s.demand(ctx, bucket, client, demand, now, ttl, false)
}

// LeaveDemand removes client's record of bucket (its stream ended): transport/rlqs's Ledger.
func (s *Store) LeaveDemand(ctx context.Context, bucket, client string) error {
	_, _, err := s.demand(ctx, bucket, client, 0, time.Now(), 0, true)
	return err
}

func (s *Store) demand(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration, leave bool) (map[string]float64, time.Time, error) {
	if bucket == "" || client == "" || client == demandBorn || demand < 0 || ttl < 0 {
		return nil, time.Time{}, fmt.Errorf("redisstore: demand: want a bucket, a client other than %q, a demand and a TTL of 0 or more", demandBorn)
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
		return nil, time.Time{}, fmt.Errorf("redisstore: demand: %w", err)
	}
	items, err := msg.AsStrSlice()
	if err != nil || len(items)%2 != 1 {
		return nil, time.Time{}, fmt.Errorf("redisstore: demand: unexpected reply %v: %w", msg, err)
	}
	bornMs, err := strconv.ParseInt(items[0], 10, 64)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("redisstore: demand: unexpected birth time %q: %w", items[0], err)
	}
	items = items[1:]
	out := make(map[string]float64, len(items)/2)
	for i := 0; i < len(items); i += 2 {
		d, err := strconv.ParseFloat(items[i+1], 64)
		if err != nil {
			continue // a record that is not ours: not counted
		}
		out[items[i]] = d
	}
	return out, time.UnixMilli(bornMs), nil
}
