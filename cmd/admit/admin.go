package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/admin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Where admit serve and the admin commands find the admin token, and where the admin API listens.
const (
	adminTokenEnv      = "ADMIT_ADMIN_TOKEN"
	adminTokenFileFlag = "admin-token-file"
	defaultAdminListen = "127.0.0.1:8082"
	defaultAdminURL    = "http://" + defaultAdminListen
)

// adminConfig is the part of admit serve's command line about the admin API.
type adminConfig struct {
	listen       string // --admin-listen: the admin API's address
	listenSet    bool   // --admin-listen was given: it needs a token
	tokenFile    string // the admin token's file, if tokenFileSet
	tokenFileSet bool   // --admin-token-file was given: it wins over ADMIT_ADMIN_TOKEN
}

// adminFlags defines the admin API's flags of admit serve on fs, into cfg.admin.
func adminFlags(fs *flag.FlagSet, cfg *serveConfig) {
	fs.StringVar(&cfg.admin.listen, "admin-listen", defaultAdminListen, "`address` of the admin API's own listener, served only with an admin token")
	fs.StringVar(&cfg.admin.tokenFile, adminTokenFileFlag, "", "read the admin token from the file at `PATH` (one trailing newline is dropped); default $"+adminTokenEnv)
}

// visit records in a that the flag f was given, if it is one of the admin API's.
func (a *adminConfig) visit(f *flag.Flag) {
	a.listenSet = a.listenSet || f.Name == "admin-listen"
	a.tokenFileSet = a.tokenFileSet || f.Name == adminTokenFileFlag
}

// adminToken returns the admin token and where it came from: the file at path, less one trailing
// newline, when fileSet (--admin-token-file was given); else $ADMIT_ADMIN_TOKEN; else nil. A token
// shorter than admin.MinTokenLen is an error. Its errors never hold the token.
func adminToken(path string, fileSet bool) (token []byte, source string, err error) {
	switch {
	case fileSet:
		if token, source, err = readSecret("--"+adminTokenFileFlag, path); err != nil {
			return nil, "", err
		}
	case os.Getenv(adminTokenEnv) != "":
		token, source = []byte(os.Getenv(adminTokenEnv)), adminTokenEnv
	default:
		return nil, "", nil
	}
	if len(token) < admin.MinTokenLen {
		return nil, "", fmt.Errorf("the admin token from %s is %d bytes; want at least %d", source, len(token), admin.MinTokenLen)
	}
	return token, source, nil
}

// startAdmin starts the admin API of admit serve when an admin token is configured: it listens on
// --admin-listen and serves there until ctx is done, then shuts down within shutdownGrace and sends
// the exit code to done, which holds one code to replace; it counts the API's changes in
// admit_admin_changes_total. Without a token it logs that the admin API is off. On a failure to
// start it returns the exit code, having logged why; else exitOK and a context that is cancelled
// when the admin server fails, so that the others stop too.
func startAdmin(ctx context.Context, d *daemon, done chan int) (context.Context, int) {
	logger := d.logger
	token, source, err := adminToken(d.cfg.admin.tokenFile, d.cfg.admin.tokenFileSet)
	switch {
	case err != nil:
		logger.Error("no usable admin token", "error", err)
		return ctx, exitUsage
	case token == nil:
		logger.Info("admin API", "state", "off", "note", "no admin token: set "+adminTokenEnv+" or --"+adminTokenFileFlag+" PATH to serve it on --admin-listen")
		return ctx, exitOK
	case d.cfg.admin.listen == d.cfg.listen && !strings.HasSuffix(d.cfg.listen, ":0"): // port 0: two free ports
		logger.Error("the admin API needs a listener of its own", "error", fmt.Errorf("--admin-listen %s is the data plane's address", d.cfg.admin.listen))
		return ctx, exitUsage
	}
	changes, err := metrics.NewAdmin(d.reg, admin.Actions()...)
	if err != nil {
		logger.Error("cannot register the admin API's metrics", "error", err)
		return ctx, exitError
	}
	h, err := admin.New(admin.Options{Service: d.svc, Token: token, Logger: logger, OnChange: changes.Changed, Stats: adminStats(d.reg)})
	if err != nil {
		logger.Error("cannot build the admin API", "error", err)
		return ctx, exitError
	}
	ln, err := net.Listen("tcp", d.cfg.admin.listen)
	if err != nil {
		logger.Error("cannot listen for the admin API", "error", err)
		return ctx, exitError
	}
	logger.Info("admin API", "state", "on", "addr", ln.Addr().String(), "token", source)
	ctx, cancel := context.WithCancel(ctx)
	<-done
	go func() {
		defer cancel() // a failed admin server stops the others
		alog := logger.With("server", "admin")
		code := exitOK
		if err := runServer(ctx, ln, newServer(h, alog), shutdownGrace, alog); err != nil {
			alog.Error("server stopped", "error", err)
			code = exitError
		}
		done <- code
	}()
	return ctx, exitOK
}

// overrideCounter returns the counter of admit_overrides: svc's OverrideCounts.
func overrideCounter(svc *service.Service) metrics.OverrideCounter {
	return func(ctx context.Context, each func(string, int64)) error {
		counts, err := svc.OverrideCounts(ctx)
		for _, c := range counts {
			each(c.Policy, c.Count)
		}
		return err
	}
}

// adminStats returns the Stats of the admin API (GET /v1/stats): the admit_* counters and gauges of
// reg, each series as one Sample; histograms and the Go runtime's and process's series are left
// out, the console has no use for them.
func adminStats(reg prometheus.Gatherer) func() ([]admin.Sample, error) {
	return func() ([]admin.Sample, error) {
		families, err := reg.Gather()
		var out []admin.Sample
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), "admit_") {
				continue
			}
			for _, m := range f.GetMetric() {
				var v float64
				switch f.GetType() {
				case dto.MetricType_COUNTER:
					v = m.GetCounter().GetValue()
				case dto.MetricType_GAUGE:
					v = m.GetGauge().GetValue()
				case dto.MetricType_UNTYPED:
					v = m.GetUntyped().GetValue()
				default:
					continue
				}
				s := admin.Sample{Name: f.GetName(), Value: v}
				if len(m.GetLabel()) > 0 {
					s.Labels = make(map[string]string, len(m.GetLabel()))
					for _, l := range m.GetLabel() {
						s.Labels[l.GetName()] = l.GetValue()
					}
				}
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			err = nil // a collector that failed leaves the others' samples: show them
		}
		return out, err
	}
}
