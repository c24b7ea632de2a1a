// Package helm holds the tests of admit's Helm chart, admit/ beside this file: it is linted and
// rendered by Helm's own packages for each values file of admit/ci/, every object it renders is
// decoded strictly into its Kubernetes type, and the policy configuration it renders passes admit's
// own validation. It is a module of its own so that Helm and the Kubernetes API types are
// dependencies of its tests only, never of admit.
package helm
