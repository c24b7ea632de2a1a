// Package compat holds admit's compatibility tests against other rate limiters: the same request
// sequences on the same Redis, decided by admit and by the reference, must agree (docs/gcra.md). It is a
// module of its own so that the references are dependencies of its tests only, never of admit.
package compat
