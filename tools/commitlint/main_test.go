package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubjectRules(t *testing.T) {
	t.Parallel()
	long := "workflows: " + strings.Repeat("x", maxColumns-len("workflows: "))
	for _, tc := range []struct {
		subject string
		want    string // a part of the one problem expected; "" for none
	}{
		{"workflows: retire the legacy deployment branch", ""},
		{"tools/commitlint: check subjects in make lint", ""},
		{"httpapi,grpcapi: map errors in one place", ""},
		{"ARCHITECTURE.md: name the replay check", "area: "},
		{"architecture.md: name the replay check", ""},
		{"deploy/helm-chart: pin the image", ""},
		{"schema_v2: add a column", ""},
		{"v5: record rollout histories", ""},
		{long, ""},
		{long + "x", "73 characters, over 72"},
		{"workflows: retire the legacy deployment branch.", "ends with a period"},
		{"Workflows: retire the legacy branch", "area: "},
		{"thorax scopes: store the result", "area: "},
		{"workflows:retire the legacy branch", "area: "},
		{"workflows:  retire the legacy branch", "area: "},
		{"workflows:", "area: "},
		{"workflows: retire the legacy branch ", "white space"},
		{"retire the legacy deployment branch", "area: "},
		{": retire the legacy branch", "area: "},
		{"-x: retire the legacy branch", "area: "},
		{`Revert "workflows: retire the legacy branch"`, "area: "},
		{"fixup! workflows: retire the legacy branch", "area: "},
		{"", "empty"},
	} {
		got := subjectProblems(tc.subject)
		if tc.want == "" {
			require.Empty(t, got, "%q", tc.subject)
			continue
		}
		require.Len(t, got, 1, "%q: %v", tc.subject, got)
		require.Contains(t, got[0], tc.want, "%q", tc.subject)
	}
	require.Len(t, subjectProblems("Workflows: "+strings.Repeat("y", 70)+"."), 3, "every broken rule is named")
}

func TestBodyRules(t *testing.T) {
	t.Parallel()
	line72 := strings.Repeat("word ", 14) + "ab"
	require.Len(t, line72, maxColumns)
	url := "https://github.com/temporalio/samples-go/blob/main/" + strings.Repeat("x", 60)
	for _, tc := range []struct {
		name    string
		message string
		want    string
	}{
		{"subject only", "docs: index the results\n", ""},
		{"wrapped body", "docs: index the results\n\n" + line72 + "\n" + line72 + "\n", ""},
		{"long line with spaces", "docs: index the results\n\n" + line72 + " more\n", "body line 3 is 77 characters"},
		{"long URL", "docs: index the results\n\nSee\n" + url + "\n", ""},
		{"long indented URL", "docs: index the results\n\n    " + url + "\n", ""},
		{"no blank line", "docs: index the results\nand more\n", "second line is not blank"},
	} {
		got := messageProblems(tc.message)
		if tc.want == "" {
			require.Empty(t, got, tc.name)
			continue
		}
		require.Len(t, got, 1, "%s: %v", tc.name, got)
		require.Contains(t, got[0], tc.want, tc.name)
	}
}

// repo is a throw-away repository with commit helpers.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) repo {
	t.Helper()
	r := repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// commit commits a change with message and returns its hash.
func (r repo) commit(message string) string {
	r.t.Helper()
	f := filepath.Join(r.dir, "f")
	old, _ := os.ReadFile(f)
	require.NoError(r.t, os.WriteFile(f, append(old, 'x'), 0o600))
	r.git("add", "f")
	r.git("commit", "-q", "-m", message)
	return r.git("rev-parse", "HEAD")
}

func (r repo) check(base string) (string, error) {
	var out bytes.Buffer
	err := run(gitIn(r.dir), base, "HEAD", &out)
	return out.String(), err
}

// Only the commits after the base are checked, a merge commit is exempt but the
// commits it brings are not, and a base the clone lacks or that is not an ancestor
// fails instead of passing.
func TestRangeFromBase(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit("Initial commit, before the rule.")
	base := r.commit("Another old commit.")
	r.commit("docs: index the results")
	out, err := r.check(base)
	require.NoError(t, err, out)
	require.Contains(t, out, "1 commits after")

	r.git("checkout", "-q", "-b", "topic")
	bad := r.commit("Fix the thing.")
	r.git("checkout", "-q", "main")
	r.commit("docs: name the command")
	r.git("merge", "-q", "--no-ff", "-m", "Merge branch 'topic'", "topic")
	out, err = r.check(base)
	require.ErrorIs(t, err, errBadMessages)
	require.Contains(t, out, short(bad)+" Fix the thing.")
	require.NotContains(t, out, "Merge branch", "a merge commit is exempt")
	require.Contains(t, out, "4 commits after "+short(base)+" checked, 1 with problems")

	_, err = r.check("0123456789abcdef0123456789abcdef01234567")
	require.ErrorContains(t, err, "is not in this repository")

	r.git("checkout", "-q", "--orphan", "rewritten")
	elsewhere := r.commit("docs: a history of its own")
	r.git("checkout", "-q", "main")
	_, err = r.check(elsewhere)
	require.ErrorContains(t, err, "is not an ancestor of HEAD")
}

// In a shallow clone without the base, the error says to fetch the history.
func TestShallowCloneWithoutBase(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	base := r.commit("Old commit.")
	r.commit("docs: one")
	r.commit("docs: two")
	clone := repo{t: t, dir: filepath.Join(t.TempDir(), "clone")}
	r.git("clone", "-q", "--depth", "1", "file://"+r.dir, clone.dir)
	_, err := clone.check(base)
	require.ErrorContains(t, err, "shallow")
	require.ErrorContains(t, err, "git fetch --unshallow")
}
