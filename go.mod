module github.com/kindtest/kindtest

go 1.26
