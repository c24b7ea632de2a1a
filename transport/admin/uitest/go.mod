module github.com/admit-dev/admit/transport/admin/uitest

go 1.26.7

require (
	github.com/admit-dev/admit v0.0.0-00010101000000-000000000000
	github.com/chromedp/chromedp v0.23.1
)

require (
	github.com/chromedp/cdproto v0.160.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/admit-dev/admit => ../../..
