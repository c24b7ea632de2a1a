package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionString is the line admit version prints: the module version, the commit and the Go
// version the binary was built with, from its build info.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return formatVersion(info, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion writes the version line of info (nil: none), built by goVersion for platform:
// "admit VERSION commit REVISION[ (modified)] GOVERSION OS/ARCH". A binary built without VCS
// stamping (go build -buildvcs=false, or in a git worktree) has the commit "unknown".
func formatVersion(info *debug.BuildInfo, goVersion, platform string) string {
	version, commit, modified := "(devel)", "unknown", ""
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && s.Value != "":
				commit = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				modified = " (modified)"
			}
		}
	}
	return fmt.Sprintf("admit %s commit %s%s %s %s", version, commit, modified, goVersion, platform)
}

// moduleVersion returns the version of admit the binary was built from, or "(devel)".
func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
