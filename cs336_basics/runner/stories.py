"""A seeded generator of simple children's stories: a corpus of any size, made offline.

Stories follow the shape of the short tales language models are often trained on first: a
character, a place, an object or a wish, a small problem, some dialogue and a happy ending.
Names and towns are built from syllables, and ages, counts and times vary, so the text has a
long tail of words and numbers for BPE to learn. Stories are separated by ``<|endoftext|>``.
Every word list here was written for this project. The same ``seed`` always gives the same text.
"""

from __future__ import annotations

import os
import random

from cs336_basics.atomic_write import atomic_writer

END_OF_TEXT = "<|endoftext|>"
SEPARATOR = f"\n{END_OF_TEXT}\n"

_SYLLABLES_START = [
    "Ba",
    "Be",
    "Bo",
    "Da",
    "Di",
    "Fi",
    "Fo",
    "Ga",
    "Ha",
    "Ji",
    "Ka",
    "Ki",
    "La",
    "Li",
    "Lu",
    "Ma",
    "Mi",
    "Mo",
    "Na",
    "Ni",
    "No",
    "Pa",
    "Pe",
    "Pi",
    "Ro",
    "Ru",
    "Sa",
    "Si",
    "Ta",
    "Ti",
    "To",
    "Va",
    "Wi",
    "Ya",
    "Zo",
    "Ella",
    "Oli",
    "Ana",
    "Isa",
    "Emi",
]
_SYLLABLES_MIDDLE = ["", "", "", "ri", "la", "mo", "ne", "di", "ko", "bi", "sa", "tu", "vi", "lo"]
_SYLLABLES_END = [
    "n",
    "na",
    "ne",
    "no",
    "ra",
    "ro",
    "ly",
    "lie",
    "by",
    "do",
    "ka",
    "ko",
    "mi",
    "sy",
    "ta",
    "to",
    "x",
    "ppy",
    "bel",
    "dy",
    "mon",
    "rin",
    "son",
    "ya",
    "za",
    "lo",
    "ma",
    "nie",
    "ra",
    "ck",
]
_TOWN_ENDINGS = ["ville", "brook", "wood", "field", "moor", "dale", "ford", "haven", "hill", "bury"]

_KINDS = [
    "girl",
    "boy",
    "rabbit",
    "bunny",
    "fox",
    "bear",
    "cat",
    "kitten",
    "dog",
    "puppy",
    "duck",
    "owl",
    "mouse",
    "frog",
    "turtle",
    "bird",
    "squirrel",
    "pig",
    "cow",
    "horse",
    "lion",
    "tiger",
    "elephant",
    "giraffe",
    "monkey",
    "penguin",
    "dragon",
    "robot",
    "fairy",
    "dinosaur",
    "hedgehog",
    "goat",
    "sheep",
    "whale",
    "butterfly",
    "ladybug",
    "snail",
    "crab",
    "seal",
]
_ADJECTIVES = [
    "little",
    "small",
    "big",
    "happy",
    "shy",
    "brave",
    "kind",
    "curious",
    "sleepy",
    "silly",
    "clever",
    "gentle",
    "tiny",
    "fluffy",
    "cheerful",
    "grumpy",
    "quiet",
    "busy",
    "friendly",
    "careful",
    "proud",
    "lonely",
    "playful",
    "bright",
    "funny",
    "polite",
    "strong",
    "fast",
]
_COLORS = [
    "red",
    "blue",
    "green",
    "yellow",
    "purple",
    "orange",
    "pink",
    "brown",
    "white",
    "black",
    "golden",
    "silver",
    "spotted",
    "striped",
    "shiny",
    "sparkly",
]
_OBJECTS = [
    "ball",
    "kite",
    "hat",
    "box",
    "book",
    "cup",
    "toy car",
    "drum",
    "shoe",
    "blanket",
    "bucket",
    "shell",
    "stone",
    "balloon",
    "crayon",
    "map",
    "key",
    "bell",
    "boat",
    "umbrella",
    "scarf",
    "flower",
    "leaf",
    "feather",
    "jar",
    "basket",
    "spoon",
    "sock",
    "puzzle",
    "teddy bear",
    "lamp",
    "ribbon",
    "whistle",
    "button",
    "pebble",
    "wagon",
    "paintbrush",
    "mitten",
    "star",
]
_PLACES = [
    "park",
    "garden",
    "forest",
    "beach",
    "farm",
    "school",
    "library",
    "pond",
    "hill",
    "meadow",
    "kitchen",
    "backyard",
    "playground",
    "river",
    "lake",
    "cave",
    "zoo",
    "market",
    "barn",
    "castle",
    "bakery",
    "treehouse",
    "village square",
    "orchard",
    "field",
    "harbor",
    "museum",
]
_FOODS = [
    "apples",
    "cookies",
    "cake",
    "bread",
    "soup",
    "carrots",
    "berries",
    "pancakes",
    "honey",
    "cheese",
    "pie",
    "bananas",
    "muffins",
    "grapes",
    "pizza",
    "noodles",
    "sandwiches",
    "jam",
]
_WEATHER = [
    "The sun was shining.",
    "It was a rainy day.",
    "The wind was blowing hard.",
    "Snow was falling softly.",
    "It was a warm summer morning.",
    "The sky was gray and cloudy.",
    "It was a cold winter night.",
    "A rainbow was in the sky.",
    "The leaves were falling.",
]
_FEELINGS = [
    "happy",
    "sad",
    "scared",
    "excited",
    "angry",
    "surprised",
    "proud",
    "worried",
    "tired",
    "glad",
]
_ACTIVITIES = [
    "play tag",
    "build a sand castle",
    "fly a kite",
    "read a book",
    "bake a cake",
    "paint a picture",
    "sing a song",
    "dance",
    "look for bugs",
    "count the clouds",
    "jump in puddles",
    "go fishing",
    "plant seeds",
    "ride a bike",
    "have a picnic",
    "play hide and seek",
    "swim",
    "climb a tree",
]
_PROBLEMS = [
    "lost {pos} {object}",
    "could not find {pos} {object}",
    "dropped {pos} {object} in the {water}",
    "broke {pos} {object}",
    "got stuck in a hole",
    "was too small to reach the {object}",
    "forgot the way home",
    "was afraid of the dark",
    "could not sleep",
    "had no one to play with",
]
_WATER = ["pond", "river", "mud", "lake", "puddle", "well"]
_HELPS = [
    "looked under every tree",
    "asked a wise old owl",
    "used a long stick",
    "followed the footprints",
    "climbed on a big rock",
    "called all the friends",
    "made a map",
    "shared a snack to feel better",
    "held hands and walked together",
    "sang a song to be brave",
    "counted to {number} slowly",
]
_MORALS = [
    "Sharing makes everyone happy.",
    "It is good to help your friends.",
    "Being brave is not the same as not being scared.",
    "Kind words can fix many things.",
    "It is okay to ask for help.",
    "Friends make hard things easy.",
    "Always say thank you.",
    "Patience pays off.",
    "Listening is a kind of magic.",
]
_SAID = ["said", "asked", "shouted", "whispered", "cried", "laughed", "replied", "called"]
_GREETINGS = [
    "Hello, {friend}!",
    "Hi, {friend}! How are you?",
    "Good morning, {friend}!",
    "Look, {friend}!",
    "Wow, {friend}, what is that?",
    "Oh no, {friend}!",
]
_LINES = [
    "I can't find my {object}!",
    "Don't worry, I'll help you.",
    "We're going to find it together.",
    "Let's go to the {place}!",
    "I'm so {feeling} today.",
    "It's not fair!",
    "You're my best friend.",
    "Can I play too?",
    "Thank you so much!",
    "I'd like some {food}, please.",
    "We've done it!",
    "Is it far?",
    "I think it's over there.",
    "They're waiting for us.",
    "Where did it go?",
    "I have {number} {food}. Do you want some?",
    "Please be careful!",
    "That's a great idea!",
]


def _name(rng: random.Random) -> str:
    return rng.choice(_SYLLABLES_START) + rng.choice(_SYLLABLES_MIDDLE) + rng.choice(_SYLLABLES_END)


def _a(word: str) -> str:
    """``word`` with its indefinite article."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _fill(template: str, rng: random.Random, **values: str) -> str:
    defaults = {
        "object": rng.choice(_OBJECTS),
        "place": rng.choice(_PLACES),
        "food": rng.choice(_FOODS),
        "feeling": rng.choice(_FEELINGS),
        "number": str(rng.choice([2, 3, 4, 5, 7, 10, 12, 20, rng.randint(2, 999)])),
        "water": rng.choice(_WATER),
    }
    return template.format(**{**defaults, **values})


def story(rng: random.Random) -> str:
    """One story drawn with ``rng``."""
    hero, friend = _name(rng), _name(rng)
    hero_kind, friend_kind = rng.choice(_KINDS), rng.choice(_KINDS)
    pronoun, pos = rng.choice([("she", "her"), ("he", "his"), ("they", "their")])
    place, thing, color = rng.choice(_PLACES), rng.choice(_OBJECTS), rng.choice(_COLORS)
    town = rng.choice(_SYLLABLES_START) + rng.choice(_SYLLABLES_END) + rng.choice(_TOWN_ENDINGS)
    opening = rng.choice(
        [
            f"Once upon a time, there was {_a(rng.choice(_ADJECTIVES))} {hero_kind} named {hero}.",
            f"One day, {_a(rng.choice(_ADJECTIVES))} {hero_kind} called {hero} went to the {place}.",
            f"{hero} was {_a(rng.choice(_ADJECTIVES))} {hero_kind} who lived in {town}.",
            f"In the town of {town}, there lived {_a(hero_kind)} named {hero}. {pronoun.capitalize()} was {rng.randint(3, 9)} years old.",
        ]
    )
    sentences = [opening, rng.choice(_WEATHER)]
    sentences.append(f"{hero} had {_a(color)} {thing}. {pronoun.capitalize()} loved it very much.")
    sentences.append(
        f"{hero} liked to {rng.choice(_ACTIVITIES)} with {pos} friend {friend}, the {friend_kind}."
    )
    dialogue = [
        f'"{_fill(rng.choice(_GREETINGS), rng, friend=friend)}" {hero} {rng.choice(_SAID)}.',
        f'"{_fill(rng.choice(_LINES), rng, object=thing)}" {friend} {rng.choice(_SAID)}.',
    ]
    problem = _fill(rng.choice(_PROBLEMS), rng, pos=pos, object=thing)
    middle = [
        f"At {rng.randint(1, 12)} o'clock, {hero} {problem}.",
        f"{hero} felt {rng.choice(_FEELINGS)}. "
        + _fill(f'"{rng.choice(_LINES)}"', rng, object=thing),
        f"{friend} and {hero} {_fill(rng.choice(_HELPS), rng)}.",
        f"They walked {rng.randint(2, 99)} steps past the {rng.choice(_PLACES)} and the {rng.choice(_OBJECTS)}.",
    ]
    ending = [
        f"At last, they found the {thing}! {hero} was so {rng.choice(['happy', 'glad', 'proud', 'excited'])}.",
        f'"Thank you, {friend}," {hero} said. "You\'re the best!"',
        f"Then they ate {rng.choice(_FOODS)} and {rng.choice(_FOODS)} together.",
    ]
    if rng.random() < 0.5:
        ending.append(rng.choice(_MORALS))
    rng.shuffle(dialogue)
    body = [" ".join(sentences), " ".join(dialogue + middle), " ".join(ending)]
    if rng.random() < 0.3:
        body.insert(
            2, " ".join(_fill(f'"{rng.choice(_LINES)}"', rng) for _ in range(rng.randint(1, 3)))
        )
    return "\n\n".join(body) if rng.random() < 0.5 else " ".join(body)


def _corpus_pieces(num_bytes: int, seed: int):
    """Stories (each after the first preceded by the separator) until ``num_bytes`` are reached."""
    rng = random.Random(seed)
    size = 0
    while size < num_bytes:
        piece = (SEPARATOR if size else "") + story(rng)
        size += len(piece.encode("utf-8"))
        yield piece


def generate_stories(num_bytes: int, seed: int = 0) -> str:
    """Stories separated by ``<|endoftext|>``: the shortest such text of at least ``num_bytes`` bytes."""
    return "".join(_corpus_pieces(num_bytes, seed))


def write_story_corpus(path: str | os.PathLike, num_bytes: int, seed: int = 0) -> int:
    """Write ``generate_stories(num_bytes, seed)`` to ``path`` atomically; return its size in bytes.

    The text is produced and written piece by piece, so any size fits in memory.
    """
    written = 0
    with atomic_writer(path) as file:
        for piece in _corpus_pieces(num_bytes, seed):
            written += file.write(piece.encode("utf-8"))
    return written
