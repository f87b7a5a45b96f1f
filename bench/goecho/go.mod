module nicguard.dev/bench/goecho

go 1.22
