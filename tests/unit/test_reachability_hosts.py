"""Reachability is kept per GitHub host: one that stops answering (a stopped sandbox, a GHE server down) never
parks the work of another, and a URL and PyGithub's connection to it name the same host."""

from bot.observability.reachability import host_key, of, of_host


def test_one_hosts_outage_leaves_another_answering():
    sandbox, github = of("http://127.0.0.1:41234"), of("https://api.github.com")
    for _ in range(5):
        sandbox.unanswered()
    assert not sandbox.up and github.up
    assert github.ticket() == "go" and sandbox.ticket() in ("trial", None)


def test_a_url_and_its_connection_name_the_same_host():
    assert of("https://api.github.com") is of_host(host_key("api.github.com", 443, "https"))
    assert of("https://API.github.com/") is of("https://api.github.com:443/api/v3")
    assert of("http://127.0.0.1:8080") is of_host(host_key("127.0.0.1", 8080, "http"))
    assert of("http://127.0.0.1:8080") is not of("http://127.0.0.1:8081")
