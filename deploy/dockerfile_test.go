package deploy_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerInstruction struct {
	Cmd  string // upper case: FROM, COPY, ...
	Args string
}

// dockerStage is one FROM and the instructions after it.
type dockerStage struct {
	Image string // the FROM image with ARG defaults substituted
	Name  string
	Body  []dockerInstruction
}

// parseDockerfile splits path into instructions (comments dropped, "\" lines
// joined) and groups them by stage; ARGs before the first FROM substitute into FROM.
func parseDockerfile(t *testing.T, path string) (globalArgs map[string]string, stages []dockerStage) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var insts []dockerInstruction
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		insts = append(insts, dockerInstruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)})
		cur.Reset()
	}
	globalArgs = map[string]string{}
	for _, in := range insts {
		switch {
		case in.Cmd == "ARG" && len(stages) == 0:
			k, v, _ := strings.Cut(in.Args, "=")
			globalArgs[k] = v
		case in.Cmd == "FROM":
			fields := strings.Fields(in.Args)
			st := dockerStage{Image: os.Expand(fields[len(fields)-1], func(k string) string { return globalArgs[k] })}
			if len(fields) >= 3 && strings.EqualFold(fields[len(fields)-2], "AS") {
				st.Image = os.Expand(fields[len(fields)-3], func(k string) string { return globalArgs[k] })
				st.Name = fields[len(fields)-1]
			}
			stages = append(stages, st)
		case len(stages) > 0:
			stages[len(stages)-1].Body = append(stages[len(stages)-1].Body, in)
		}
	}
	return globalArgs, stages
}

// imagePinned reports whether ref names a tag (or digest) other than latest.
func imagePinned(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	name := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	return ok && tag != "" && tag != "latest"
}

func TestDockerfileRules(t *testing.T) {
	t.Parallel()
	_, stages := parseDockerfile(t, "Dockerfile")
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage: a build stage and a runtime stage")
	for _, st := range stages {
		require.True(t, imagePinned(st.Image), "FROM %s is not pinned to a tag other than latest", st.Image)
	}
	final := stages[len(stages)-1]
	byCmd := map[string][]string{}
	for _, st := range stages {
		for _, in := range st.Body {
			require.False(t, in.Cmd == "ADD" && regexp.MustCompile(`https?://`).MatchString(in.Args),
				"ADD of a URL: %s", in.Args)
		}
	}
	for _, in := range final.Body {
		byCmd[in.Cmd] = append(byCmd[in.Cmd], in.Args)
	}
	users := byCmd["USER"]
	require.NotEmpty(t, users, "the final stage sets USER")
	uid, _, _ := strings.Cut(users[len(users)-1], ":")
	require.Regexp(t, `^[1-9][0-9]*$`, uid, "USER is a numeric, non-zero uid")
	labels := strings.Join(byCmd["LABEL"], " ")
	for _, key := range []string{"title", "description", "source", "version", "revision"} {
		require.Contains(t, labels, "org.opencontainers.image."+key+"=")
	}
	require.Len(t, byCmd["HEALTHCHECK"], 1)
	require.NotEqual(t, "NONE", strings.TrimSpace(byCmd["HEALTHCHECK"][0]))
	require.Len(t, byCmd["ENTRYPOINT"], 1)
	require.NotContains(t, byCmd, "ADD", "the final stage copies, it does not ADD")
	binaries := map[string]bool{"mandible": true, "thorax": true, "agent": true, "mantisctl": true, "mantis-healthcheck": true}
	copied := map[string]bool{}
	for _, args := range byCmd["COPY"] {
		fields := strings.Fields(args)
		require.True(t, strings.HasPrefix(fields[0], "--from="), "the final stage copies only from the build stage: COPY %s", args)
		for _, src := range fields[1 : len(fields)-1] {
			name := src[strings.LastIndex(src, "/")+1:]
			require.True(t, binaries[name], "COPY --from of a binary only, not %s", src)
			copied[name] = true
		}
	}
	require.Equal(t, binaries, copied, "the image carries the four binaries and its health probe")
	build := strings.Join(func() []string {
		var s []string
		for _, in := range stages[0].Body {
			s = append(s, in.Cmd+" "+in.Args)
		}
		return s
	}(), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w`} {
		require.Contains(t, build, want, "static, reproducible binaries")
	}
}

func TestDockerignoreKeepsTheContextSmall(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Dockerfile.dockerignore")
	require.NoError(t, err)
	for _, want := range []string{".git", ".mantis", "bin"} {
		require.Contains(t, strings.Fields(string(b)), want)
	}
}
