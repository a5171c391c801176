"""The one fresh-name rule (intq.ir.names) every stage uses."""

from intq.ir.names import claim, free_name


def test_free_name_skips_every_taken_container():
    assert free_name("w", set()) == "w"
    assert free_name("w", {"w"}, {"w_1": 0}) == "w_2"  # a dict counts by its keys


def test_claim_records_the_name_it_returns():
    taken = {"a"}
    assert claim("a", taken) == "a_1"
    assert claim("a", taken) == "a_2"
    assert taken == {"a", "a_1", "a_2"}
    assert claim("b", taken, {"b"}) == "b_1"  # `also` is read, not written
