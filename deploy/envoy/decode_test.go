// Package envoy_test checks the Envoy configurations shipped in deploy/envoy, deploy/istio and
// deploy/envoy-gateway: each is decoded strictly into Envoy's own protobuf types and validated
// by their generated Validate methods, and the descriptors their rate_limits actions build for
// sample requests are limited by the shipped ratelimit.yaml on a real admit rate limit service.
package envoy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	// The types that typed_config and typed_extension_protocol_options name, registered so that
	// protojson resolves their Any values (an unregistered type is an error, never skipped).
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// strict decodes like Envoy's own loader, but stricter: an unknown field is an error.
var strict = protojson.UnmarshalOptions{DiscardUnknown: false}

// validator is what protoc-gen-validate generates on every Envoy message; ValidateAll reports
// every violation, not only the first.
type validator interface{ ValidateAll() error }

// yamlDocuments returns the YAML documents of data, each as JSON.
func yamlDocuments(data []byte) ([][]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs [][]byte
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		j, err := toJSON(v)
		if err != nil {
			return nil, err
		}
		docs = append(docs, j)
	}
}

// toJSON marshals a value decoded from YAML as JSON; a mapping with a key that is not a string
// is an error (JSON has none).
func toJSON(v any) ([]byte, error) {
	if err := stringKeys(v, "$"); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func stringKeys(v any, path string) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if err := stringKeys(e, path+"."+k); err != nil {
				return err
			}
		}
	case map[any]any:
		return fmt.Errorf("%s: a mapping key that is not a string", path)
	case []any:
		for i, e := range x {
			if err := stringKeys(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeStrict unmarshals the JSON data into m, refusing unknown fields and unresolvable Any
// types, and validates it with its generated rules.
func decodeStrict(data []byte, m proto.Message) error {
	if err := strict.Unmarshal(data, m); err != nil {
		return err
	}
	v, ok := m.(validator)
	if !ok {
		return fmt.Errorf("%T has no generated validation", m)
	}
	return v.ValidateAll()
}

// decodeValue re-marshals a value decoded from YAML (a patch's value) and decodes it strictly
// into m.
func decodeValue(v any, m proto.Message) error {
	j, err := toJSON(v)
	if err != nil {
		return err
	}
	return decodeStrict(j, m)
}

// readFile returns the contents of the shipped file name, failing the test when it is missing.
func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
