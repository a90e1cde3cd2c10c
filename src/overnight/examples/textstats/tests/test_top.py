import unittest

from textstats import top_words


class TopWordsTest(unittest.TestCase):
    def test_most_frequent_first(self):
        self.assertEqual(top_words("a b b c c c", 2), [("c", 3), ("b", 2)])

    def test_ties_are_alphabetical(self):
        self.assertEqual(top_words("pear apple pear apple fig", 2), [("apple", 2), ("pear", 2)])


if __name__ == "__main__":
    unittest.main()
