package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Block is a fenced code block of a Markdown page, or a directive to run another
// page's blocks (an HTML comment, invisible once rendered):
//
//	```sh host=control
//	<!-- fleet: run ../security/certificates.md host=control -->
//
// The info string's first word is the language; the words after it are attributes
// (key=value) or flags.
type Block struct {
	File  string
	Line  int
	Lang  string
	Attrs map[string]string
	Flags []string
	Text  string
	// Include is the page a directive names, relative to File's directory.
	Include string
}

// directive is the comment that runs another page's blocks.
var directive = regexp.MustCompile(`^<!--\s*fleet:\s*run\s+(\S+)((?:\s+\S+=\S+)*)\s*-->$`)

// ReadBlocks returns the fenced blocks and directives of the page at path, in order.
func ReadBlocks(path string) ([]Block, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var (
		out   []Block
		cur   *Block
		lines []string
	)
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur != nil && trimmed == "```":
			cur.Text = strings.Join(lines, "\n") + "\n"
			out = append(out, *cur)
			cur, lines = nil, nil
		case cur != nil:
			lines = append(lines, line)
		case strings.HasPrefix(trimmed, "```"):
			cur = infoBlock(path, i+1, strings.Fields(strings.TrimPrefix(trimmed, "```")))
		case directive.MatchString(trimmed):
			m := directive.FindStringSubmatch(trimmed)
			blk := infoBlock(path, i+1, strings.Fields(m[2]))
			blk.Include = filepath.Join(filepath.Dir(path), m[1])
			out = append(out, *blk)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block never closed", path, cur.Line)
	}
	return out, nil
}

func infoBlock(path string, line int, words []string) *Block {
	blk := &Block{File: path, Line: line, Attrs: map[string]string{}}
	for i, w := range words {
		k, v, ok := strings.Cut(w, "=")
		switch {
		case i == 0 && !ok:
			blk.Lang = w
		case ok:
			blk.Attrs[k] = v
		default:
			blk.Flags = append(blk.Flags, w)
		}
	}
	return blk
}

// Has reports whether the block carries flag.
func (b Block) Has(flag string) bool {
	for _, f := range b.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// Where names the block's place, path:line.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", filepath.Base(b.File), b.Line) }
