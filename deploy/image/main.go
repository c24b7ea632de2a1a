// Command imagebuild writes admit's container image without Docker: a tarball that docker load
// and podman load take, with one layer holding the files of the Dockerfile's COPY lines, taken
// from this machine (-file DEST=SRC), and the configuration the Dockerfile's final stage sets
// (USER, WORKDIR, ENV, EXPOSE, LABEL, ENTRYPOINT, CMD). make image runs it:
//
//	imagebuild -dockerfile Dockerfile -arch amd64 -build-arg VERSION=v1.2.0 \
//	    -file /admit=bin/admit-linux-amd64 \
//	    -file /etc/ssl/certs/ca-certificates.crt=/etc/ssl/certs/ca-certificates.crt \
//	    -tag admit:v1.2.0 -o bin/admit-image.tar
//
// The image is reproducible: the same files and flags write the same bytes.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// listFlag is a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var o options
	var files, args listFlag
	flag.StringVar(&o.dockerfile, "dockerfile", "Dockerfile", "the Dockerfile whose final stage the image follows")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "the image's architecture, the binary's GOARCH")
	flag.StringVar(&o.tag, "tag", "admit:dev", "the image's name in the tarball, as docker load and podman load name it")
	flag.StringVar(&o.out, "o", "admit-image.tar", "the tarball to write")
	flag.Var(&files, "file", "DEST=SRC: the file at DEST in the image is SRC of this machine; one for each COPY of the Dockerfile")
	flag.Var(&args, "build-arg", "NAME=VALUE: the value of the Dockerfile's ARG NAME")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	var err error
	if o.files, err = pairs("-file", files); err != nil {
		fail(err)
	}
	if o.args, err = pairs("-build-arg", args); err != nil {
		fail(err)
	}
	if err := build(o); err != nil {
		fail(err)
	}
}

// fail prints err and exits 1.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "imagebuild:", err)
	os.Exit(1)
}

// pairs splits each NAME=VALUE of list, given with flag, into a map.
func pairs(flag string, list []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want NAME=VALUE", flag, kv)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%s %s given twice", flag, k)
		}
		m[k] = v
	}
	return m, nil
}

// options are what build makes an image of.
type options struct {
	dockerfile string
	arch       string
	tag        string
	out        string
	files      map[string]string // destination in the image: source file
	args       map[string]string // the Dockerfile's build arguments
}

// build writes the image that o describes to o.out.
func build(o options) error {
	s, err := readSpec(o.dockerfile, o.args)
	if err != nil {
		return err
	}
	img, err := image(s, o)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", o.tag, err)
	}
	if dir := path.Dir(o.out); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return tarball.WriteToFile(o.out, ref, img)
}

// image returns the image of spec s with the files of o.
func image(s spec, o options) (v1.Image, error) {
	want, got := slices.Sorted(slices.Values(s.Copies)), slices.Sorted(maps.Keys(o.files))
	if !slices.Equal(want, got) {
		return nil, fmt.Errorf("the files given (-file) are %q, the Dockerfile's COPY destinations %q: want one for each", got, want)
	}
	layerTar, err := layer(s.Copies, o.files)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		User:         s.User,
		WorkingDir:   s.WorkingDir,
		Entrypoint:   s.Entrypoint,
		Cmd:          s.Cmd,
		Env:          s.Env,
		Labels:       s.Labels,
		ExposedPorts: map[string]struct{}{},
	}
	for _, p := range s.Exposed {
		cf.Config.ExposedPorts[p] = struct{}{}
	}
	return mutate.ConfigFile(img, cf)
}

// epoch is the time of every file of the layer and of the image, for a reproducible image.
var epoch = time.Unix(0, 0).UTC()

// layer returns the tar of the layer holding each of dests, read from files[dest], with the
// directories above them: root-owned, executables (any x bit on SRC) 0755, other files 0644.
func layer(dests []string, files map[string]string) ([]byte, error) {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	dirs := map[string]bool{}
	for _, dest := range dests {
		for _, d := range parents(dest) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		data, err := os.ReadFile(files[dest])
		if err != nil {
			return nil, fmt.Errorf("-file %s: %w", dest, err)
		}
		fi, err := os.Stat(files[dest])
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if fi.Mode()&0o111 != 0 {
			mode = 0o755
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dest, "/"), Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := w.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), errors.Join(w.Close())
}

// parents returns the directories above the absolute path p, outermost first, without the root:
// "/etc/ssl/certs/ca.crt" has "etc", "etc/ssl", "etc/ssl/certs".
func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append([]string{strings.TrimPrefix(d, "/")}, out...)
	}
	return out
}
