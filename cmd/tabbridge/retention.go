package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// defaultAuditRetention is how long the audit log keeps an entry.
const defaultAuditRetention = 90 * 24 * time.Hour

// retention is --audit-retention: a number of days ("90d"), a Go duration
// ("720h"), or 0 to keep every entry. Less than an hour is refused: a call
// can be in flight for minutes, and an hour is no audit log.
type retention time.Duration

func parseRetention(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("%q: want days such as 90d, a duration such as 720h, or 0 to keep everything", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want days such as 90d, a duration such as 720h, or 0 to keep everything", s)
		}
	}
	if d < time.Hour {
		return 0, fmt.Errorf("%q: want at least 1h (or 0 to keep everything)", s)
	}
	return d, nil
}

func (r *retention) String() string {
	d := time.Duration(*r)
	if d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}

func (r *retention) Set(s string) error {
	d, err := parseRetention(s)
	if err != nil {
		return err
	}
	*r = retention(d)
	return nil
}
