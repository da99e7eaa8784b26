package terminal

// Resizing as xterm.js 6.0.0 does it (Buffer.resize and BufferReflow.ts):
// rows come from history or go to it depending on where the cursor is, and
// in the normal buffer lines joined by soft wraps are re-wrapped at the new
// width (a line longer than the new width is split even when it was not
// wrapped). The viewer is xterm.js, so the same steps are taken here in
// the same order, odd results included: the differential tests compare the
// two after every resize (xterm_resize_test.go). Only a resize runs this
// code; writes never do.

// reflowState is a buffer taken apart for a resize: its lines as a plain
// list, oldest first, and the positions xterm.js adjusts as it goes.
type reflowState struct {
	lines   []*line
	maxLen  int // the list's capacity (xterm.js's CircularList.maxLength)
	ybase   int
	y       int
	savedY  int
	oldCols int
	cols    int // the new width
	rows    int // the new height
}

// nullCell is xterm.js's null cell with the default attributes.
var nullCell = cell{width: 1}

// resize changes the buffer to cols×rows; reflow is set for the normal
// buffer (xterm.js reflows only a buffer with scrollback).
func (b *buffer) resize(cols, rows int, reflow bool) {
	s := &reflowState{
		lines: make([]*line, 0, b.n), maxLen: b.max, ybase: b.n - b.rows, y: b.y,
		savedY: b.savedY, oldCols: b.cols, cols: cols, rows: rows,
	}
	for i := range b.n {
		s.lines = append(s.lines, b.at(i))
	}
	newMax := rows + b.scrollback
	s.maxLen = max(s.maxLen, newMax)
	if len(s.lines) > 0 {
		if b.cols < cols {
			for _, l := range s.lines {
				l.resize(cols, nullCell)
			}
		}
		addToY := 0
		if b.rows < rows {
			for range rows - b.rows {
				if len(s.lines) >= rows+s.ybase {
					continue
				}
				if s.ybase > 0 && len(s.lines) <= s.ybase+s.y+addToY+1 {
					// room above and no line below the cursor: pull one
					// back from history
					s.ybase--
					addToY++
				} else {
					s.lines = append(s.lines, newLine(cols, nullCell))
				}
			}
		} else {
			for range b.rows - rows {
				if len(s.lines) <= rows+s.ybase {
					continue
				}
				if len(s.lines) > s.ybase+s.y+1 {
					s.lines = s.lines[:len(s.lines)-1] // below the cursor: dropped
				} else {
					s.ybase++ // the cursor's line: the screen moves down
				}
			}
		}
		if newMax < s.maxLen {
			if trim := len(s.lines) - newMax; trim > 0 {
				s.lines = s.lines[trim:]
				s.ybase = max(s.ybase-trim, 0)
				s.savedY = max(s.savedY-trim, 0)
			}
			s.maxLen = newMax
		}
		b.x = min(b.x, cols-1)
		s.y = min(s.y, rows-1) + addToY
		b.savedX = min(b.savedX, cols-1)
		b.top = 0
	}
	b.bottom = rows - 1
	if reflow && b.cols != cols {
		if cols > b.cols {
			s.reflowLarger()
		} else {
			s.reflowSmaller()
		}
	}
	if reflow && b.cols > cols {
		for _, l := range s.lines {
			l.resize(cols, nullCell)
		}
	}
	if len(s.lines) > 0 {
		// the ring holds ybase + rows lines: xterm.js's own invariant, kept
		// by every step above
		for len(s.lines) < s.ybase+rows {
			s.lines = append(s.lines, newLine(cols, nullCell))
		}
		if extra := len(s.lines) - (s.ybase + rows); extra > 0 {
			s.lines = s.lines[:len(s.lines)-extra]
		}
	}
	b.ring, b.start, b.n, b.max = s.lines, 0, len(s.lines), s.maxLen
	b.y, b.savedY = s.y, s.savedY
	b.rows, b.cols = rows, cols
	b.extendTabs()
}

// wrappedTrimmed is xterm.js's getWrappedLineTrimmedLength: the cells line
// i of a wrapped run holds, cols unless it is the last (its own trimmed
// length) or ends in an empty cell that a wide character at the start of
// the next line did not fit in.
func wrappedTrimmed(group []*line, i, cols int) int {
	if i == len(group)-1 {
		return group[i].trimmedLength()
	}
	endsInNull := !group[i].hasContent(cols-1) && group[i].widthAt(cols-1) == 1
	if endsInNull && group[i+1].widthAt(0) == 2 {
		return cols - 1
	}
	return cols
}

// cursorIn reports whether the cursor's line is one of lines first..end-1:
// xterm.js leaves those for the program to redraw (reflowCursorLine off).
func (s *reflowState) cursorIn(first, end int) bool {
	abs := s.ybase + s.y
	return abs >= first && abs < end
}

// reflowLarger joins wrapped runs at a greater width and removes the lines
// they no longer need.
func (s *reflowState) reflowLarger() {
	var toRemove []int // pairs: index, count
	for y := 0; y < len(s.lines)-1; y++ {
		i := y + 1
		if !s.lines[i].wrapped {
			continue
		}
		group := []*line{s.lines[y]}
		for i < len(s.lines) && s.lines[i].wrapped {
			group = append(group, s.lines[i])
			i++
		}
		if s.cursorIn(y, i) {
			y += len(group) - 1
			continue
		}
		destLine, destCol := 0, wrappedTrimmed(group, 0, s.oldCols)
		srcLine, srcCol := 1, 0
		for srcLine < len(group) && destLine < len(group) {
			srcTrim := wrappedTrimmed(group, srcLine, s.oldCols)
			n := min(srcTrim-srcCol, s.cols-destCol)
			group[destLine].copyCells(group[srcLine], srcCol, destCol, n, false)
			destCol += n
			if destCol == s.cols {
				destLine++
				destCol = 0
			}
			srcCol += n
			if srcCol == srcTrim {
				srcLine++
				srcCol = 0
			}
			// a wide character must not end a line: it moves to the next
			if destCol == 0 && destLine != 0 && destLine < len(group) && group[destLine-1].widthAt(s.cols-1) == 2 {
				group[destLine].copyCells(group[destLine-1], s.cols-1, destCol, 1, false)
				destCol++
				group[destLine-1].set(s.cols-1, nullCell)
			}
		}
		if destLine >= len(group) {
			// xterm.js throws here (the run's last line is undefined) and
			// the viewer is left half resized; the run is left as it is
			y += len(group) - 1
			continue
		}
		group[destLine].replaceCells(destCol, s.cols, nullCell)
		count := 0
		for k := len(group) - 1; k > 0; k-- {
			if k > destLine || group[k].trimmedLength() == 0 {
				count++
			} else {
				break
			}
		}
		if count > 0 {
			toRemove = append(toRemove, y+len(group)-count, count)
		}
		y += len(group) - 1
	}
	if len(toRemove) == 0 {
		return
	}
	kept := s.lines[:0:0]
	removed := 0
	for i, next := 0, 0; i < len(s.lines); i++ {
		if next < len(toRemove) && toRemove[next] == i {
			n := toRemove[next+1]
			i += n - 1
			removed += n
			next += 2
			continue
		}
		kept = append(kept, s.lines[i])
	}
	s.lines = kept
	for range removed {
		if s.ybase == 0 {
			if s.y > 0 {
				s.y--
			}
			if len(s.lines) < s.rows {
				s.lines = append(s.lines, newLine(s.cols, nullCell))
			}
		} else {
			s.ybase--
		}
	}
	s.savedY = max(s.savedY-removed, 0)
}

// newLineLengths is xterm.js's reflowSmallerGetNewLineLengths: how many
// cells each line of a wrapped run holds at the smaller width (one less
// where a wide character would be cut).
func newLineLengths(group []*line, oldCols, cols int) []int {
	needed := 0
	for i := range group {
		needed += wrappedTrimmed(group, i, oldCols)
	}
	var out []int
	srcCol, srcLine, avail := 0, 0, 0
	for avail < needed {
		if needed-avail < cols {
			out = append(out, needed-avail)
			break
		}
		srcCol += cols
		if old := wrappedTrimmed(group, srcLine, oldCols); srcCol > old {
			srcCol -= old
			srcLine++
		}
		n := cols
		if srcLine < len(group) && group[srcLine].widthAt(srcCol-1) == 2 {
			srcCol--
			n--
		}
		out = append(out, n)
		avail += n
	}
	return out
}

// insertion is a run of new lines to be put at index start.
type insertion struct {
	start int
	lines []*line
}

// reflowSmaller splits lines wider than the new width, from the bottom up,
// and inserts the lines they need.
func (s *reflowState) reflowSmaller() {
	var toInsert []insertion
	countToInsert := 0
	// all is the list as it was: lines popped below (to make room on a
	// screen not yet full) are still read there, as xterm.js's
	// CircularList.get still finds them in its array.
	all := s.lines
	for y := len(all) - 1; y >= 0; y-- {
		next := all[y]
		if !next.wrapped && next.trimmedLength() <= s.cols {
			continue
		}
		group := []*line{next}
		for next.wrapped && y > 0 {
			y--
			next = all[y]
			group = append([]*line{next}, group...)
		}
		if s.cursorIn(y, y+len(group)) {
			continue
		}
		lastLen := group[len(group)-1].trimmedLength()
		destLens := newLineLengths(group, s.oldCols, s.cols)
		linesToAdd := len(destLens) - len(group)
		var trimmed int
		if s.ybase == 0 && s.y != len(s.lines)-1 {
			trimmed = max(0, s.y-s.maxLen+linesToAdd)
		} else {
			trimmed = max(0, len(s.lines)-s.maxLen+linesToAdd)
		}
		var added []*line
		for range linesToAdd {
			l := newLine(s.cols, nullCell)
			l.wrapped = true
			added = append(added, l)
		}
		if len(added) > 0 {
			toInsert = append(toInsert, insertion{start: y + len(group) + countToInsert, lines: added})
			countToInsert += len(added)
		}
		group = append(group, added...)
		s.copyBackwards(group, destLens, linesToAdd, lastLen)
		// the cell after a line cut short for a wide character is emptied
		for i := range group {
			if i < len(destLens) && destLens[i] < s.cols {
				group[i].set(destLens[i], nullCell)
			}
		}
		for adj := linesToAdd - trimmed; adj > 0; adj-- {
			if s.ybase == 0 {
				if s.y < s.rows-1 {
					s.y++
					s.lines = s.lines[:len(s.lines)-1]
				} else {
					s.ybase++
				}
			} else if s.ybase < min(s.maxLen, len(s.lines)+countToInsert)-s.rows {
				s.ybase++
			}
		}
		s.savedY = min(s.savedY+linesToAdd, s.ybase+s.rows-1)
	}
	if len(toInsert) == 0 {
		return
	}
	orig := s.lines
	newLen := min(s.maxLen, len(orig)+countToInsert)
	out := make([]*line, newLen)
	oi, next, inserted := len(orig)-1, 0, 0
	for i := min(s.maxLen-1, len(orig)+countToInsert-1); i >= 0; i-- {
		if next < len(toInsert) && toInsert[next].start > oi+inserted {
			ins := toInsert[next].lines
			for k := len(ins) - 1; k >= 0; k-- {
				if i >= 0 { // xterm.js's set at a negative index is lost
					out[i] = ins[k]
				}
				i--
			}
			i++
			inserted += len(ins)
			next++
			continue
		}
		if oi >= 0 {
			out[i] = orig[oi]
		}
		oi--
	}
	for i := range out {
		if out[i] == nil {
			out[i] = newLine(s.cols, nullCell)
		}
	}
	s.lines = out
}

// copyBackwards moves a run's cells to their places at the smaller width,
// from the last cell to the first so that it can work in place.
func (s *reflowState) copyBackwards(group []*line, destLens []int, linesToAdd, lastLen int) {
	destIdx := len(destLens) - 1
	if destIdx < 0 {
		return
	}
	destCol := destLens[destIdx]
	if destCol == 0 {
		destIdx--
		if destIdx < 0 {
			return
		}
		destCol = destLens[destIdx]
	}
	srcIdx := len(group) - linesToAdd - 1
	srcCol := lastLen
	for srcIdx >= 0 {
		if destIdx < 0 || destIdx >= len(group) {
			break
		}
		n := min(srcCol, destCol)
		group[destIdx].copyCells(group[srcIdx], srcCol-n, destCol-n, n, true)
		destCol -= n
		if destCol == 0 {
			destIdx--
			if destIdx >= 0 {
				destCol = destLens[destIdx]
			}
		}
		srcCol -= n
		if srcCol == 0 {
			srcIdx--
			srcCol = wrappedTrimmed(group, max(srcIdx, 0), s.oldCols)
		}
	}
}
