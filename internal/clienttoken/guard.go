package clienttoken

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// HTTP returns next behind the Set: a request to a path other than those of open (exact paths,
// such as "/healthz") must bear a token, else it is answered 401 with `WWW-Authenticate: Bearer`
// and the body {"error":"unauthorized"}, nothing more.
func (s *Set) HTTP(next http.Handler, open ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(open, r.URL.Path) || s.Bearer(r.Header.Values("Authorization")) {
			next.ServeHTTP(w, r)
			return
		}
		s.refuse(r.Context(), "http", r.RemoteAddr)
		hdr := w.Header()
		hdr.Set("WWW-Authenticate", "Bearer")
		hdr.Set("Content-Type", "application/json")
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"unauthorized"}` + "\n"))
	})
}

// OpenGRPCService is the gRPC service a token is never asked of: grpc.health.v1, for the probes.
const OpenGRPCService = "/grpc.health.v1.Health/"

// GRPC returns the server options that put every gRPC method but those of OpenGRPCService
// behind the Set: a call without a token, in the metadata `authorization: Bearer TOKEN`, fails
// with codes.Unauthenticated and the message "unauthenticated", nothing more.
func (s *Set) GRPC() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := s.authorize(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return handler(srv, ss)
		}),
	}
}

// authorize returns nil when method is open or ctx's metadata bear a token of the Set.
func (s *Set) authorize(ctx context.Context, method string) error {
	if strings.HasPrefix(method, OpenGRPCService) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if s.Bearer(md.Get("authorization")) {
		return nil
	}
	client := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		client = p.Addr.String()
	}
	s.refuse(ctx, "grpc", client)
	return status.Error(codes.Unauthenticated, "unauthenticated")
}
