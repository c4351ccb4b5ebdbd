from accounts import User, display_name


def test_nickname_wins():
    assert display_name(User("Ada Lovelace", "ada")) == "ada"


def test_blank_nickname_falls_back_to_the_name():
    assert display_name(User("Alan Turing", "  ")) == "Alan Turing"
