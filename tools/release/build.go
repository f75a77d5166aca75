package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Program is one binary of a release and the package that installs it.
type Program struct {
	// Cmd is the directory under cmd/ it is built from.
	Cmd string
	// Installed is its name in /usr/bin and in the tarball.
	Installed string
	// Package is the name of its .deb and .rpm.
	Package string
	// Unit is its systemd unit under deploy/systemd ("" for none).
	Unit string
	// Config is the sample under deploy/ packaged as /etc/mantis/<ConfigName>
	// ("" for none).
	Config, ConfigName string
	Summary            string
}

// Programs are what a release ships.
var Programs = []Program{
	{Cmd: "agent", Installed: "mantis-agent", Package: "mantis-agent", Unit: "mantis-agent.service",
		Config: "agent-poll.toml", ConfigName: "agent.toml",
		Summary: "Mantis agent: runs deployment commands on this host for Thorax"},
	{Cmd: "mandible", Installed: "mantis-mandible", Package: "mantis-mandible", Unit: "mantis-mandible.service",
		Config: "mandible.toml", ConfigName: "mandible.toml",
		Summary: "Mantis Mandible: the control plane (HTTP API, gRPC for Thorax, Temporal workers)"},
	{Cmd: "thorax", Installed: "mantis-thorax", Package: "mantis-thorax", Unit: "mantis-thorax.service",
		Config: "thorax.toml", ConfigName: "thorax.toml",
		Summary: "Mantis Thorax: the execution tier between Mandible and the agents"},
	{Cmd: "mantisctl", Installed: "mantisctl", Package: "mantis-cli",
		Summary: "mantisctl: the Mantis command-line client"},
}

// buildBinaries builds every program for linux/arch into dir and returns their
// paths by Installed name.
func buildBinaries(o options, arch, dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range Programs {
		path, err := filepath.Abs(filepath.Join(dir, p.Installed))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace("-s -w "+o.LDFlags),
			"-o", path, "./cmd/"+p.Cmd)
		cmd.Dir = o.Repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		fmt.Fprintf(os.Stderr, "building %s for linux/%s\n", p.Installed, arch)
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("building %s for linux/%s: %w", p.Cmd, arch, err)
		}
		out[p.Installed] = path
	}
	return out, nil
}

// writeTarball writes mantis_<version>_linux_<arch>.tar.gz: the binaries under
// their installed names in bin/, the units as the packages install them in
// systemd/, and the configuration samples in etc/mantis/.
func writeTarball(o options, arch string, bins map[string]string) error {
	prefix := fmt.Sprintf("mantis_%s_linux_%s", o.Version, arch)
	f, err := os.Create(filepath.Join(o.Dist, prefix+".tar.gz"))
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, p := range Programs {
		b, err := os.ReadFile(bins[p.Installed])
		if err != nil {
			return err
		}
		entries := map[string][]byte{"bin/" + p.Installed: b}
		if p.Unit != "" {
			unit, err := PackagedUnit(o.Repo, p)
			if err != nil {
				return err
			}
			entries["systemd/"+p.Unit] = unit
		}
		if p.Config != "" {
			if entries["etc/mantis/"+p.ConfigName], err = os.ReadFile(filepath.Join(o.Repo, "deploy", p.Config)); err != nil {
				return err
			}
		}
		for _, name := range sortedKeys(entries) {
			mode := int64(0o644)
			if strings.HasPrefix(name, "bin/") {
				mode = 0o755
			}
			hdr := &tar.Header{Name: prefix + "/" + name, Mode: mode, Size: int64(len(entries[name])), ModTime: o.MTime, Format: tar.FormatPAX}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(entries[name]); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// PackagedUnit is p's unit from deploy/systemd with the binary's path of the
// packages: /usr/local/bin/<cmd> becomes /usr/bin/<installed name>.
func PackagedUnit(repo string, p Program) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "systemd", p.Unit))
	if err != nil {
		return nil, err
	}
	from, to := "/usr/local/bin/"+p.Cmd, "/usr/bin/"+p.Installed
	unit := strings.ReplaceAll(string(b), from, to)
	if !strings.Contains(unit, "\nExecStart="+to+" ") {
		return nil, fmt.Errorf("%s: no ExecStart=%s to rewrite to %s", p.Unit, from, to)
	}
	return []byte(unit), nil
}

func copyTo(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
