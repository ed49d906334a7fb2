package driver

import "strings"

// ptxEntryParams returns the number of parameters of each kernel (.entry)
// declared in PTX text, keyed by kernel name (PTX ISA §11.2 "Kernel and
// Function Directives: .entry": `.entry name ( .param ..., .param ... )`,
// the parameter list optional). Comments are skipped. Launches use it to
// refuse an argument count that differs from the kernel's before the driver
// reads kernelParams, without probing cuFuncGetParamInfo past the last
// parameter (a failing call that compute-sanitizer reports).
func ptxEntryParams(ptx string) map[string]int {
	src := stripPTXComments(ptx)
	out := map[string]int{}
	for i := 0; ; {
		j := strings.Index(src[i:], ".entry")
		if j < 0 {
			return out
		}
		at := i + j
		i = at + len(".entry")
		if at > 0 && !isPTXSpace(src[at-1]) || i >= len(src) || !isPTXSpace(src[i]) {
			continue // part of a longer token
		}
		k := skipPTXSpace(src, i)
		start := k
		for k < len(src) && isPTXIdent(src[k]) {
			k++
		}
		name := src[start:k]
		if name == "" {
			continue
		}
		k = skipPTXSpace(src, k)
		n := 0
		if k < len(src) && src[k] == '(' {
			end := strings.IndexByte(src[k:], ')')
			if end < 0 {
				return out
			}
			list := strings.TrimSpace(src[k+1 : k+end])
			if list != "" {
				n = strings.Count(list, ",") + 1
			}
			i = k + end
		}
		out[name] = n
	}
}

// stripPTXComments replaces // and /* */ comments with spaces.
func stripPTXComments(s string) string {
	if !strings.Contains(s, "//") && !strings.Contains(s, "/*") {
		return s
	}
	b := []byte(s)
	for i := 0; i+1 < len(b); i++ {
		switch {
		case b[i] == '"': // string literals (in .file directives) may hold slashes
			for i++; i < len(b) && b[i] != '"' && b[i] != '\n'; i++ {
			}
		case b[i] == '/' && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case b[i] == '/' && b[i+1] == '*':
			for ; i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/'); i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}

func isPTXSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isPTXIdent reports whether c may appear in a PTX identifier (PTX ISA §4.4:
// letters, digits, _, $ and %).
func isPTXIdent(c byte) bool {
	return c == '_' || c == '$' || c == '%' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func skipPTXSpace(s string, i int) int {
	for i < len(s) && isPTXSpace(s[i]) {
		i++
	}
	return i
}
