package main

import "strings"

// commandLine joins the words after `run --` into the shell command the agent runs.
// One word is a shell command as it is (`run -- 'ls | wc -l'`); several are quoted
// word by word, so each reaches the command as typed (`run -- printf 'a\000b'`).
func commandLine(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for a POSIX shell: as it is when it holds only characters no
// shell treats specially, else in single quotes, each ' written as '\”.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, needsQuoting) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// needsQuoting reports whether r is anything but a letter, a digit or one of the
// punctuation characters a shell never interprets in a word.
func needsQuoting(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("@%+=:,./_-", r)
}
