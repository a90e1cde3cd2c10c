import unittest

from textstats import words


class WordsTest(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(words("the cat sat"), ["the", "cat", "sat"])

    def test_case_and_punctuation(self):
        self.assertEqual(words("Hello, world! Hello."), ["hello", "world", "hello"])


if __name__ == "__main__":
    unittest.main()
