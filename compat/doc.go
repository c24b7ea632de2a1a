// Package compat holds admit's compatibility tests against other rate limiters: the same request
// sequences on the same Redis, decided by admit and by the reference, must agree (SPEC §2.4). It is a
// module of its own so that the references are dependencies of its tests only, never of admit.
package compat
