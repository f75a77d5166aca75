package agent

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"io"
	"net/url"
	"slices"

	"github.com/mantis-deploy/mantis/internal/secretenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// secretValues returns the values of cmd's secret env, and the names of those too
// short to be masked (secretenv.MinMaskBytes).
func secretValues(cmd *mantisv1.Command) (values, short []string) {
	for _, name := range cmd.GetSecretEnv() {
		v, ok := cmd.GetEnv()[name]
		switch {
		case !ok || v == "":
		case len(v) < secretenv.MinMaskBytes:
			short = append(short, name)
		default:
			values = append(values, v)
		}
	}
	return values, short
}

// maskPatterns returns the byte strings that stand for values in output: each
// value, its base64 (standard and URL alphabets, padded and not) and its URL
// encodings (query and path), without repeats, longest first.
func maskPatterns(values []string) [][]byte {
	var forms []string
	for _, v := range values {
		b := []byte(v)
		forms = append(forms, v,
			base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
			base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
			url.QueryEscape(v), url.PathEscape(v))
	}
	slices.SortFunc(forms, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b))
	})
	forms = slices.Compact(forms)
	patterns := make([][]byte, len(forms))
	for i, f := range forms {
		patterns[i] = []byte(f)
	}
	return patterns
}

// secretMasker writes a command's output to w with every secret pattern replaced by
// secretenv.Mask. A pattern may be split across writes, so a write's last bytes that
// could begin one (at most the longest pattern's length less one) are held back until
// the next write or Flush. What it writes does not depend on how the output was cut
// into writes, so the live output and the result's tail, both fed from it, agree.
// Its buffers are reused: once they have grown to a write's size, writing allocates
// nothing. Without patterns it passes output through.
type secretMasker struct {
	w        io.Writer
	patterns [][]byte // longest first
	first    [256]bool
	held     []byte // the end of the output so far that may begin a pattern
	scratch  []byte // held followed by the write being masked
	out      []byte // the masked bytes of one write
}

func newSecretMasker(w io.Writer, values []string) *secretMasker {
	m := &secretMasker{w: w, patterns: maskPatterns(values)}
	for _, p := range m.patterns {
		m.first[p[0]] = true
	}
	return m
}

// Write masks p, holding back a tail that may begin a pattern. Only w's error fails
// it.
func (m *secretMasker) Write(p []byte) (int, error) {
	if len(m.patterns) == 0 {
		return m.w.Write(p)
	}
	m.scratch = append(append(m.scratch[:0], m.held...), p...)
	n := m.mask(m.scratch, false)
	m.held = append(m.held[:0], m.scratch[n:]...)
	if len(m.out) > 0 {
		if _, err := m.w.Write(m.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what is held back, masked, once the output is over.
func (m *secretMasker) Flush() error {
	if len(m.held) == 0 {
		return nil
	}
	m.mask(m.held, true)
	m.held = m.held[:0]
	_, err := m.w.Write(m.out)
	return err
}

// mask puts buf, its patterns replaced, in m.out and returns how many bytes of buf
// it took: all of them when final, else all but a tail that may begin a pattern.
func (m *secretMasker) mask(buf []byte, final bool) int {
	m.out = m.out[:0]
	copied := 0
	for i := 0; i < len(buf); {
		if !m.first[buf[i]] {
			i++
			continue
		}
		n, wait := m.matchAt(buf[i:], final)
		switch {
		case wait:
			m.out = append(m.out, buf[copied:i]...)
			return i
		case n > 0:
			m.out = append(append(m.out, buf[copied:i]...), secretenv.Mask...)
			i += n
			copied = i
		default:
			i++
		}
	}
	m.out = append(m.out, buf[copied:]...)
	return len(buf)
}

// matchAt returns the length of the longest pattern b starts with, or reports that
// b, not final, is the start of a longer pattern than any it holds whole: what
// follows decides.
func (m *secretMasker) matchAt(b []byte, final bool) (n int, wait bool) {
	for _, p := range m.patterns {
		if len(p) > len(b) {
			if !final && bytes.HasPrefix(p, b) {
				return 0, true
			}
			continue
		}
		if bytes.HasPrefix(b, p) {
			return len(p), false
		}
	}
	return 0, false
}
