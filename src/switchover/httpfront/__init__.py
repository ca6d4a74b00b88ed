"""httpfront: the loopback HTTP/1.1 server front (strict llhttp parsing, limits, pipelining) that the gateway and
the review UI both serve clients on. It knows nothing of routing: a handler gets one checked request at a time."""
