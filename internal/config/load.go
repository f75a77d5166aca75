package config

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// load applies the file at path (none when path is "") and then env to cfg,
// a pointer to a configuration. It returns whether the file set each key
// (for overrides that must not beat the file), the problems found, and an
// error when the file cannot be read or parsed at all.
func load(cfg any, path string, env func(string) (string, bool)) (fileSets func(key ...string) bool, errs Errors, err error) {
	fileSets = func(...string) bool { return false }
	if path != "" {
		md, fileErrs, err := decodeFile(cfg, path)
		if err != nil {
			return nil, nil, err
		}
		fileSets = md.IsDefined
		errs = append(errs, fileErrs...)
	}
	errs = append(errs, applyEnv(cfg, env)...)
	return fileSets, errs, nil
}

// loadAndFinish is the whole load of a process without loader rules of its own: the
// defaults in cfg, then the file at path, the environment and the secret files,
// validated.
func loadAndFinish[T interface{ Validate() error }](cfg T, path string, env func(string) (string, bool)) (T, error) {
	_, errs, err := load(&cfg, path, env)
	if err != nil {
		var zero T
		return zero, err
	}
	errs = append(errs, readSecretFiles(&cfg)...)
	return finish(cfg, errs)
}

// finish validates cfg and returns it, or the zero configuration and every
// problem found, the loading problems first.
func finish[T interface{ Validate() error }](cfg T, errs Errors) (T, error) {
	if err := cfg.Validate(); err != nil {
		var more Errors
		if errors.As(err, &more) {
			errs = append(errs, more...)
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		var zero T
		return zero, errs
	}
	return cfg, nil
}

// namePattern is what replica ids and instance and agent names may look
// like: they end up in Temporal task queues, consumer tags and logs.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (p *problems) name(key, value string) {
	switch {
	case value == "":
		p.add(key, "required")
	case !namePattern.MatchString(value):
		p.add(key, "must match %s, got %q", namePattern, value)
	}
}

// hostName returns this machine's host name, reduced to namePattern's
// alphabet and cut to at most max characters.
func hostName(max int) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	h = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, h)
	if len(h) > max {
		h = h[:max]
	}
	return h
}

// defaultReplicaID is "<hostname>-<pid>", within namePattern.
func defaultReplicaID() string {
	pid := "-" + strconv.Itoa(os.Getpid())
	return hostName(64-len(pid)) + pid
}
