package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/admit-dev/admit/redisstore"
)

// preflightTimeout bounds one preflight of Redis; preflightRetryInterval is how long admit waits
// before running it again while Redis does not answer.
var (
	preflightTimeout       = 2 * time.Second
	preflightRetryInterval = 5 * time.Second
)

// errPreflight is the error of a preflight that found a permission problem at startup.
var errPreflight = errors.New("the Redis preflight found a permission problem")

// preflight runs s.Preflight at startup. A permission problem refuses to start: it is logged and
// preflight returns errPreflight. A warning is logged at WARN. While Redis does not answer (admit
// starts anyway, failing open or closed as configured) the preflight is retried in the background,
// until ctx is done or it runs once; a permission problem found then is logged at ERROR, and the
// running server goes on.
func preflight(ctx context.Context, s *redisstore.Store, logger *slog.Logger) error {
	err := preflightOnce(ctx, s, logger, slog.LevelError)
	if errors.Is(err, redisstore.ErrPermission) {
		return errPreflight
	}
	if err == nil {
		return nil
	}
	interval := preflightRetryInterval // read here, not by the goroutine, which may outlive the caller's test
	logger.Warn("Redis preflight: Redis does not answer; starting anyway, the preflight will be retried",
		"retry", interval, "error", err)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := preflightOnce(ctx, s, logger, slog.LevelError); err == nil || errors.Is(err, redisstore.ErrPermission) {
				return
			}
		}
	}()
	return nil
}

// preflightOnce runs the preflight once and logs what it found: a permission problem at level, a
// warning at WARN, success at INFO. It returns the preflight's error.
func preflightOnce(ctx context.Context, s *redisstore.Store, logger *slog.Logger, level slog.Level) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	rep, err := s.Preflight(ctx)
	if errors.Is(err, redisstore.ErrPermission) {
		logger.Log(ctx, level, "Redis preflight: the Redis user lacks a permission admit needs; see docs/redis.md (ACL)",
			"error", err, "acl", redisstore.ACLRules())
		return err
	}
	if err != nil {
		return err
	}
	for _, w := range rep.Warnings {
		logger.Warn("Redis preflight: "+w, "maxmemory_policy", rep.MaxmemoryPolicy)
	}
	logger.Info("Redis preflight passed", "maxmemory_policy", rep.MaxmemoryPolicy)
	return nil
}
