package metrics

import "github.com/prometheus/client_golang/prometheus"

// Admin is the counter of the changes made through the admin API. It is safe for concurrent use.
// Make one with [NewAdmin].
//
// Its series:
//
//	admit_admin_changes_total{action}   changes made, by action (reset, …); refused ones are not counted
type Admin struct {
	changes *prometheus.CounterVec
}

// NewAdmin returns an Admin registered into reg, with a series at 0 for each of actions.
func NewAdmin(reg prometheus.Registerer, actions ...string) (*Admin, error) {
	a := &Admin{changes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "admit_admin_changes_total",
		Help: "Changes made through the admin API, by action (reset, ...). Refused changes are not counted.",
	}, []string{"action"})}
	if err := reg.Register(a.changes); err != nil {
		return nil, err
	}
	for _, action := range actions {
		a.changes.WithLabelValues(action)
	}
	return a, nil
}

// Changed counts one change of action made.
func (a *Admin) Changed(action string) {
	a.changes.WithLabelValues(action).Inc()
}
