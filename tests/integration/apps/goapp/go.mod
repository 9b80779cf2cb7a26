module hotspan.test/goapp

go 1.19
