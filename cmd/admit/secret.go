package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
)

// hmacSecret returns the HMAC secret that cfg and the environment name, and where it came from:
// the file of --hmac-secret-file, less one trailing newline; else $ADMIT_HMAC_SECRET; else the file
// of the configuration's server.hmac_secret_file; else nil. Its errors never hold the secret.
func hmacSecret(cfg serveConfig) (secret []byte, source string, err error) {
	switch {
	case cfg.secretFileSet:
		if secret, source, err = readSecret("--"+secretFileFlag, cfg.secretFile); err != nil {
			return nil, "", err
		}
	case os.Getenv(secretEnv) != "":
		secret, source = []byte(os.Getenv(secretEnv)), secretEnv
	case cfg.fileSecretFile != "":
		if secret, source, err = readSecret("server.hmac_secret_file", cfg.fileSecretFile); err != nil {
			return nil, "", err
		}
	default:
		return nil, "", nil
	}
	if len(secret) < bound.MinSecretLen {
		return nil, "", fmt.Errorf("the HMAC secret from %s is %d bytes; want at least %d", source, len(secret), bound.MinSecretLen)
	}
	return secret, source, nil
}

// readSecret reads the secret in the file at path, less one trailing newline, naming it source.
func readSecret(source, path string) ([]byte, string, error) {
	if path == "" {
		return nil, "", fmt.Errorf("%s: empty path", source)
	}
	secret, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err) // the path, never the contents
	}
	if s, ok := bytes.CutSuffix(secret, []byte("\n")); ok {
		secret = bytes.TrimSuffix(s, []byte("\r")) // a CRLF too
	}
	return secret, source, nil
}

// keyBuilder returns the KeyBuilder of the HMAC secret that cfg names, and logs where the secret came
// from, never the secret. Without a secret it refuses a Redis backend, and uses a random one for
// the in-memory backend.
func keyBuilder(cfg serveConfig, logger *slog.Logger) (*admit.KeyBuilder, error) {
	secret, source, err := hmacSecret(cfg)
	switch {
	case err != nil:
		return nil, err
	case secret == nil && cfg.redisURL != "":
		return nil, fmt.Errorf("no HMAC secret: with --redis or REDIS_URL, set %s or --%s PATH "+
			"to a secret of at least %d bytes that every instance on the Redis shares; "+
			"instances with different secrets make different keys and do not share limits",
			secretEnv, secretFileFlag, bound.MinSecretLen)
	case secret == nil:
		secret = make([]byte, randomSecretLen)
		rand.Read(secret) // never fails
		logger.Info("HMAC secret", "source", "random",
			"note", "a random secret of this process only; set "+secretEnv+" or --"+secretFileFlag+" to choose one")
	default:
		logger.Info("HMAC secret", "source", source)
	}
	return admit.NewKeyBuilder(secret)
}
