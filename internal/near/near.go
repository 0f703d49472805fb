// Package near finds the name nearest to one mistyped: for "did you mean" hints (a file of a
// folder, a flag of a command).
package near

// Distance is the Levenshtein distance of a and b (bytes), or limit+1 when it is over
// limit.
func Distance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		low := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			low = min(low, cur[j])
		}
		if low > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Best returns the candidate nearest to name, within limit edits (and fewer than half of
// name's letters), or "" when none is.
func Best(name string, candidates []string, limit int) string {
	best, bestD := "", min(limit, (len(name)-1)/2)+1
	for _, c := range candidates {
		if d := Distance(name, c, bestD-1); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
