package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestReloadConfigMapSwap: a configuration file in a Kubernetes ConfigMap volume is reloaded when
// the kubelet updates it. The kubelet's layout is rebuilt here: the files in a timestamped
// directory, a symlink ..data to it, and config.yaml a symlink through ..data; an update writes a
// new directory, points a new symlink at it, renames that over ..data in one step and removes the
// old directory. The file's own path never changes, so admit's look at its bytes sees each update.
func TestReloadConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	publish := func(stamp, text string) {
		t.Helper()
		data := filepath.Join(dir, stamp)
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(data, "config.yaml"), text)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(stamp, tmp); err != nil {
			t.Fatal(err)
		}
		old, _ := os.Readlink(filepath.Join(dir, "..data"))
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if old != "" {
			if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := fmt.Sprintf(reloadConfig, 5)
	publish("..2026_12_02_10_00_00.000000001", first)
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), file); err != nil {
		t.Fatal(err)
	}
	logs, reg := startReloader(t, file, first)

	for i, stamp := range []string{"..2026_12_02_10_01_00.000000002", "..2026_12_02_10_02_00.000000003"} {
		text := fmt.Sprintf(reloadConfig, 6+i)
		publish(stamp, text)
		sum := sha256.Sum256([]byte(text))
		logs.waitLine(t, "hash="+hex.EncodeToString(sum[:]))
		if fi, err := os.Lstat(file); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("config.yaml is no longer the symlink the kubelet keeps: %v", err)
		}
	}
	if n := reloadFailures(t, reg); n != 0 {
		t.Errorf("admit_config_reloads_total{result=\"failure\"} = %v; want 0:\n%s", n, logs)
	}
}
