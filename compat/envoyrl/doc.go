// Package envoyrl holds admit's differential tests against envoyproxy/ratelimit, the reference
// implementation of Envoy's rate limit service, run live: the same configuration files loaded by
// both, the same gRPC requests sent to envoyproxy/ratelimit's own service binary and to admit serve
// --envoy-config, each on a redis-server of its own, and the answers compared (docs/envoy.md, "The
// live oracle"). It is a module of its own so that envoyproxy/ratelimit and its dependencies are
// dependencies of these tests only, never of admit; its tests build the reference from the Go module
// proxy at the version go.mod pins.
package envoyrl
