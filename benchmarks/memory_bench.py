"""Long-term memory: write and search latency at 100,000 facts, and retrieval recall@5.

What it measures (issue 6):

1. *Latency at scale.* 10 users x 10,000 facts each (100,000 facts) in one store, on SQLite, on the
   PostgreSQL server at 127.0.0.1:5432 (vectors as BYTEA, ranked with numpy) and on a throwaway
   Postgres 16 + pgvector from the `pgserver` wheel (vectors ranked in SQL). Then:
   write p50/p99 of one new fact, *embedding included* (a text never seen before, so the int8 MiniLM
   really runs), and search p50/p99 of `retrieve(k=5)` (query embedding, BM25/full text, exact vector
   ranking, fusion, row fetch) over that user's 10,000 facts. Goals: write <= 20 ms, search <= 20 ms.
   The filler facts are realistic and they compete with the labelled ones (contacts, trips,
   restaurants visited, purchases, meetings...), so the search is no easier than in production.
2. *Recall@5* on a labelled set of seed-000-style questions ("which city should the dentist be in",
   "book a table, vegetarian food, in my city", "is this pad thai safe for me?"): 30 users with
   realistic profiles, including moves, job changes and replayed old imports (the expected answer
   is always the *current* value), plus abstention questions whose right answer is nothing.
   Reported in a small store ("profile": the user's ~25 facts) and inside the 10,000-fact haystack.
   The anchor is seed 000's own retriever (word overlap over key and value); the ablations are
   BM25 alone and MiniLM alone.

The labelled set is generated deterministically and written to `benchmarks/data/memory_questions.jsonl`
(`--write-questions`); if that file exists it is what is evaluated, so it can be read and edited.

Usage: `python benchmarks/memory_bench.py [--quick] [--users N] [--facts-per-user N]
[--backends sqlite,postgres,pgvector] [--write-questions]`; `MAITRE_BENCH_QUICK=1` is `--quick`.
The 100,000-fact run embeds 100,000 texts once (about two minutes on 2 cores; cached under the
temp directory for reruns) and loads each backend (about a minute each).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from maitre.embeddings import MiniLMEmbedder, default_embedder
from maitre.memory import Candidate, MemoryPolicy, MemoryStore
from maitre.memory.model import DEFAULT_MULTI_VALUED, fact_text
from maitre.memory.retrieval import query_terms
from maitre.memory.rows import facts_by_seq

__all__ = ["main"]

PG_DSN = os.environ.get("MAITRE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
QUESTIONS_FILE = Path(__file__).parent / "data" / "memory_questions.jsonl"
GOAL_MS = 20.0
FILLER_KEYS = (
    "contact",
    "trip",
    "restaurant_visited",
    "purchase",
    "meeting",
    "book_read",
    "movie_watched",
    "note",
)
POLICY = MemoryPolicy(multi_valued=DEFAULT_MULTI_VALUED | set(FILLER_KEYS))
BENCH_SECRET = "maitre-bench-tombstone-secret"
"""Postgres stores need their tombstone secret from configuration (a throwaway one here)."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- vocabulary -------------------------------------------------------------------------------------

FIRST = [
    "Asha",
    "Ravi",
    "Meera",
    "Arjun",
    "Priya",
    "Karthik",
    "Neha",
    "Vikram",
    "Ananya",
    "Rohan",
    "Sara",
    "Daniel",
    "Fatima",
    "Wei",
    "Maria",
    "Tom",
    "Aisha",
    "Kenji",
    "Olga",
    "Pedro",
    "Lakshmi",
    "Imran",
    "Divya",
    "Suresh",
    "Chloe",
    "Mateo",
    "Nia",
    "Yusuf",
    "Hana",
    "Leo",
]
LAST = [
    "Sharma",
    "Rao",
    "Iyer",
    "Menon",
    "Patel",
    "Khan",
    "Reddy",
    "Nair",
    "Gupta",
    "Das",
    "Fernandes",
    "Kapoor",
    "Bose",
    "Pillai",
    "Chen",
    "Silva",
    "Novak",
    "Okafor",
    "Tanaka",
    "Muller",
    "Costa",
    "Joshi",
]
CITIES = [
    "Pune",
    "Bengaluru",
    "Chennai",
    "Mumbai",
    "Hyderabad",
    "Kochi",
    "Jaipur",
    "Delhi",
    "Kolkata",
    "Mysuru",
    "Goa",
    "Lisbon",
    "Berlin",
    "Toronto",
    "Austin",
    "Nairobi",
    "Singapore",
    "Ahmedabad",
    "Indore",
    "Chandigarh",
    "Coimbatore",
    "Lucknow",
    "Madrid",
    "Dubai",
    "Colombo",
]
DIETS = [
    "vegetarian",
    "vegan",
    "pescatarian",
    "eggetarian",
    "jain",
    "halal",
    "gluten-free",
    "vegetarian food only",
    "no beef",
    "keto",
]
ALLERGIES = [
    "peanuts",
    "shellfish",
    "gluten",
    "lactose",
    "penicillin",
    "sesame",
    "eggs",
    "tree nuts",
    "soy",
    "cats",
    "bee stings",
    "dust mites",
]
LANGUAGES = [
    "Kannada",
    "Hindi",
    "Tamil",
    "Marathi",
    "English",
    "Spanish",
    "Portuguese",
    "German",
    "Japanese",
    "Bengali",
    "Telugu",
    "Malayalam",
    "French",
    "Arabic",
]
EMPLOYERS = [
    "Infosys",
    "Wipro",
    "TCS",
    "Flipkart",
    "Zomato",
    "Apollo Hospital",
    "Deutsche Bank",
    "Swiggy",
    "Razorpay",
    "Tata Motors",
    "Accenture",
    "Freshworks",
    "the city council",
    "Delhi Public School",
]
JOBS = [
    "data engineer",
    "nurse",
    "teacher",
    "architect",
    "accountant",
    "product manager",
    "chef",
    "lawyer",
    "physiotherapist",
    "graphic designer",
    "civil engineer",
    "pharmacist",
]
DOCTORS = ["Dr Mehta", "Dr Rao", "Dr Kulkarni", "Dr Thomas", "Dr Banerjee", "Dr Hegde", "Dr Ortiz", "Dr Lim"]
PETS = [
    "dog named Bruno",
    "cat named Miso",
    "dog named Coco",
    "parrot named Mithu",
    "cat named Luna",
    "dog named Sheru",
    "rabbit named Pepper",
]
CUISINES = [
    "South Indian",
    "Thai",
    "Italian",
    "Chinese",
    "Mexican",
    "Lebanese",
    "Japanese",
    "Bengali",
    "Punjabi",
    "Korean",
]
AIRLINES = ["IndiGo", "Air India", "Vistara", "Lufthansa", "Emirates", "Akasa Air"]
SEATS = ["aisle seat", "window seat"]
CARS = ["Hyundai Creta", "Honda City", "Maruti Swift", "Tata Nexon EV", "Toyota Innova", "Kia Seltos"]
GYMS = ["Cult.fit Koramangala", "Gold's Gym Baner", "Anytime Fitness Indiranagar", "the YMCA pool"]
BUDGETS = ["under 2000 INR for dinners", "around 1500 INR per meal", "under 5000 INR for hotels per night"]
TIMEZONES = ["Asia/Kolkata", "Europe/Lisbon", "America/Toronto", "Asia/Singapore", "Europe/Berlin"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
COLOURS = ["teal", "mustard yellow", "navy blue", "maroon", "olive green"]
TEAMS = ["Royal Challengers Bengaluru", "Chennai Super Kings", "Mumbai Indians", "FC Goa", "Benfica"]

RELATIONS = [
    "college friend",
    "colleague",
    "neighbour",
    "cousin",
    "gym buddy",
    "client",
    "school friend",
    "former manager",
    "landlord's son",
    "book club friend",
]
HOTELS = ["Taj", "Lemon Tree", "Ibis", "a homestay", "an Airbnb near the beach", "the Marriott", "a hostel"]
DISHES = [
    "masala dosa",
    "ramen",
    "paneer tikka",
    "fish curry",
    "margherita pizza",
    "pho",
    "biryani",
    "falafel",
    "thali",
    "dim sum",
    "tacos",
    "pasta arrabbiata",
]
OPINIONS = ["excellent", "too spicy", "overpriced", "worth a revisit", "bland", "great for groups"]
RESTAURANTS = [
    "Mavalli Tiffin Room",
    "Toit",
    "Bademiya",
    "Saravana Bhavan",
    "Vaishali",
    "Paragon",
    "Karim's",
    "Bombay Canteen",
    "Sushi Haus",
    "Olive Bistro",
    "Dakshin",
    "Truffles",
]
ITEMS = [
    "noise-cancelling headphones",
    "a standing desk",
    "running shoes",
    "a pressure cooker",
    "a Kindle",
    "a mechanical keyboard",
    "an air purifier",
    "a yoga mat",
    "a rice cooker",
    "a backpack",
]
SHOPS = ["Croma", "Amazon", "Decathlon", "IKEA", "Reliance Digital", "Flipkart", "a local store"]
TOPICS = [
    "quarterly budget",
    "hiring plan",
    "product launch",
    "data migration",
    "vendor contract",
    "school admission",
    "home loan",
    "tax filing",
    "kitchen renovation",
    "marathon training",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
ADJ = ["Silent", "Broken", "Hidden", "Last", "Golden", "Midnight", "Lost", "Quiet", "Burning", "Paper"]
NOUN = [
    "River",
    "Garden",
    "Empire",
    "Letters",
    "Orchard",
    "Harbour",
    "Mountain",
    "Atlas",
    "Kingdom",
    "Bridge",
]


def filler_fact(rng: random.Random) -> tuple[str, str]:
    """One realistic background fact (these keys are multi-valued: thousands of values each)."""
    kind = rng.choice(FILLER_KEYS)
    if kind == "contact":
        value = f"{rng.choice(FIRST)} {rng.choice(LAST)}, {rng.choice(RELATIONS)} from {rng.choice(CITIES)}"
    elif kind == "trip":
        value = (
            f"{rng.choice(CITIES)} in {rng.choice(MONTHS)} {rng.randint(2015, 2026)}, "
            f"stayed at {rng.choice(HOTELS)}"
        )
    elif kind == "restaurant_visited":
        value = (
            f"{rng.choice(RESTAURANTS)} in {rng.choice(CITIES)}, the {rng.choice(DISHES)} was "
            f"{rng.choice(OPINIONS)}"
        )
    elif kind == "purchase":
        value = f"{rng.choice(ITEMS)} from {rng.choice(SHOPS)} for {rng.randint(5, 400) * 100} INR"
    elif kind == "meeting":
        value = f"{rng.choice(TOPICS)} review with {rng.choice(FIRST)} on {rng.choice(WEEKDAYS)}"
    elif kind == "book_read":
        value = f"{rng.choice(ADJ)} {rng.choice(NOUN)} by {rng.choice(FIRST)} {rng.choice(LAST)}"
    elif kind == "movie_watched":
        value = f"The {rng.choice(ADJ)} {rng.choice(NOUN)} ({rng.randint(1990, 2026)}), rated {rng.randint(3, 10)}/10"
    else:
        value = f"{rng.choice(TOPICS)}: {rng.choice(['call', 'email', 'ask'])} {rng.choice(FIRST)} about it"
    return kind, value


# -- the labelled set -----------------------------------------------------------------------------------

# key -> (how the value is drawn, seed-style questions that need that key)
PROFILE: dict[str, tuple[Sequence[str], Sequence[str]]] = {
    "city": (
        CITIES,
        [
            "which city should the dentist be in",
            "find a dentist near me",
            "what's the weather like where I live?",
            "suggest weekend plans near home",
            "where do I live now?",
            "book a cab to the airport in my city",
            "find a gym close to where I live",
            "which city am I based in these days?",
        ],
    ),
    "diet": (
        DIETS,
        [
            "suggest a dinner recipe I can eat",
            "what should I order for lunch given my diet?",
            "plan a menu for my birthday party that suits my diet",
            "can I eat chicken biryani?",
            "what kind of food do I eat?",
        ],
    ),
    "allergy": (
        ALLERGIES,
        [
            "which foods should I avoid?",
            "what am I allergic to?",
            "is this pad thai with peanuts safe for me?",
            "anything I should tell the restaurant about allergies?",
        ],
    ),
    "language": (
        LANGUAGES,
        [
            "which languages can I read a menu in?",
            "find me a movie in a language I understand",
            "what languages do I speak?",
        ],
    ),
    "employer": (
        EMPLOYERS,
        [
            "where do I work?",
            "draft an email to HR at my company",
            "which company am I at these days?",
        ],
    ),
    "occupation": (JOBS, ["what do I do for a living?", "write a LinkedIn headline for my job"]),
    "dentist": (
        DOCTORS,
        ["book a checkup with my dentist", "who is my dentist?", "my tooth hurts, who should I call?"],
    ),
    "pet": (PETS, ["find a vet for my pet", "what's my pet called?", "find pet-friendly hotels for my trip"]),
    "favourite_cuisine": (CUISINES, ["pick a restaurant I'd like", "what cuisine do I enjoy most?"]),
    "airline": (AIRLINES, ["which airline do I prefer?", "book my flight to Delhi on the airline I like"]),
    "seat_preference": (
        SEATS,
        ["aisle or window for me?", "book a train ticket with my usual seat preference"],
    ),
    "partner": (
        [f"{f} {ln}" for f in FIRST[:12] for ln in LAST[:6]],
        ["plan a surprise for my partner", "what's my partner's name?"],
    ),
    "birthday": (
        [f"{d} {m}" for d in (3, 9, 14, 21, 27) for m in MONTHS],
        ["when is my birthday?", "how old will I turn and when is my birthday"],
    ),
    "timezone": (TIMEZONES, ["schedule a call at 9 my time", "what time zone am I in?"]),
    "car": (CARS, ["book a service for my car", "what car do I drive?"]),
    "gym": (GYMS, ["which gym do I go to?", "cancel my gym session for tomorrow"]),
    "budget": (BUDGETS, ["find a restaurant within my budget", "how much do I like to spend on dinner?"]),
    "hometown": (CITIES, ["where did I grow up?", "plan a trip to my hometown"]),
    "favourite_colour": (COLOURS, ["what's my favourite colour?", "pick a gift wrap in a colour I like"]),
    "favourite_team": (TEAMS, ["which team do I support?", "when does my team play next?"]),
    "preferred_name": ([f for f in FIRST], ["how should you address me?", "what do I like to be called?"]),
}
MULTI_PROFILE = {"allergy": 2, "language": 2}
UPDATABLE = ["city", "employer", "diet", "dentist", "car", "gym"]
COMBOS = [  # questions that need two facts, like seed 000's third retrieval
    ("book a table, vegetarian food, in my city", ("diet", "city")),
    ("find a restaurant in my city that serves food I can eat", ("city", "diet")),
    ("plan my commute to work from home", ("city", "employer")),
    ("book a dinner for my partner and me at a place I'd like", ("partner", "favourite_cuisine")),
]
ABSTAIN = [  # (question, key that must be absent for the user to ask it)
    ("what is my blood type?", "blood_type"),
    ("what's my shoe size?", "shoe_size"),
    ("when is my wedding anniversary?", "anniversary"),
    ("who is my landlord?", "landlord"),
    ("what is my sister's name?", "sister"),
    ("which university did I attend?", "university"),
    ("what's my passport number?", "passport"),
    ("how tall am I?", "height"),
]


@dataclass(kw_only=True)
class LabelledSet:
    """Facts per user and questions with their expected current facts."""

    facts: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)

    def users(self) -> list[str]:
        return list(dict.fromkeys(f["user"] for f in self.facts))


def build_labelled_set(n_users: int = 30, seed: int = 6) -> LabelledSet:
    """A deterministic, realistic labelled set (see the module docstring)."""
    rng = random.Random(seed)
    data = LabelledSet()
    for u in range(n_users):
        user = f"user{u:02d}"
        keys = [k for k in PROFILE if rng.random() < 0.7 or k in ("city", "diet", "employer")]
        current: dict[str, list[str]] = {}
        for key in keys:
            pool, _ = PROFILE[key]
            values = rng.sample(list(pool), MULTI_PROFILE.get(key, 1))
            month = rng.randint(1, 6)
            if key in UPDATABLE and rng.random() < 0.45:
                old = rng.choice([v for v in pool if v not in values])
                data.facts.append(
                    dict(
                        user=user,
                        key=key,
                        value=old,
                        valid_from=f"2025-{month:02d}-10",
                        source="message:early",
                    )
                )
                if rng.random() < 0.5:  # the old fact replayed by a later import: must stay history
                    data.facts.append(
                        dict(
                            user=user,
                            key=key,
                            value=old,
                            valid_from=f"2025-{month:02d}-10",
                            source="import:replay",
                        )
                    )
            for v in values:
                data.facts.append(
                    dict(
                        user=user,
                        key=key,
                        value=v,
                        valid_from=f"2026-{month:02d}-15",
                        source=f"message:{uuid.UUID(int=rng.getrandbits(128)).hex[:8]}",
                    )
                )
            current[key] = values
        for key in keys:
            options = [q for q in PROFILE[key][1] if not ("peanuts" in q and "peanuts" not in current[key])]
            data.questions.append(
                dict(
                    user=user,
                    question=rng.choice(options),
                    category="single-fact",
                    expect=[[key, v] for v in current[key]],
                )
            )
        for q, need in COMBOS:
            if all(k in current for k in need) and rng.random() < 0.5:
                data.questions.append(
                    dict(
                        user=user,
                        question=q,
                        category="multi-fact",
                        expect=[[k, v] for k in need for v in current[k]],
                    )
                )
        for q, absent in rng.sample(ABSTAIN, 3):
            data.questions.append(
                dict(user=user, question=q, category="abstention", expect=[], absent=absent)
            )
    return data


def write_labelled_set(data: LabelledSet, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for f in data.facts:
            fh.write(json.dumps({"type": "fact", **f}, ensure_ascii=False) + "\n")
        for q in data.questions:
            fh.write(json.dumps({"type": "question", **q}, ensure_ascii=False) + "\n")


def read_labelled_set(path: Path) -> LabelledSet:
    data = LabelledSet()
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        kind = record.pop("type")
        (data.facts if kind == "fact" else data.questions).append(record)
    return data


# -- embedding once ------------------------------------------------------------------------------------


class CachedEmbedder:
    """MiniLM behind a text -> vector cache, so loading 100,000 facts into three backends embeds once.

    Bulk embedding uses a 2-thread MiniLM; texts not in the cache (every measured write, every query)
    go to the process-wide default embedder, exactly as a store without this cache would.
    """

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache: dict[str, np.ndarray] = {}

    @property
    def dim(self) -> int:
        return self.inner.dim

    def warm(self, texts: list[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if not missing:
            return
        digest = hashlib.sha256("\x1e".join(missing).encode()).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / f"maitre-memory-bench-{digest}.npy"
        if path.exists():
            matrix = np.load(path)
            log(f"  loaded {len(missing):,} cached embeddings from {path}")
        else:
            t0 = time.perf_counter()
            chunks = []
            for start in range(0, len(missing), 2048):
                chunks.append(self.inner.embed(missing[start : start + 2048]))
                done = start + len(chunks[-1])
                rate = done / (time.perf_counter() - t0)
                log(f"  embedded {done:,}/{len(missing):,} texts ({rate:,.0f}/s)")
            matrix = np.concatenate(chunks)
            np.save(path, matrix)
        self.cache.update(zip(missing, matrix, strict=True))

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, t in enumerate(texts) if t not in self.cache]
        if missing:  # the measured writes: the runtime's default embedder, as a store would use it
            computed = default_embedder().embed([texts[i] for i in missing])
            for j, i in enumerate(missing):
                out[i] = computed[j]
                self.cache[texts[i]] = computed[j]
        for i, t in enumerate(texts):
            if t in self.cache:
                out[i] = self.cache[t]
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return default_embedder().embed_query(text)


# -- stores ------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Backend:
    name: str
    open: Callable[[], MemoryStore]
    cleanup: Callable[[], None] = lambda: None


def make_backends(names: Iterable[str], embedder: Any, workdir: Path) -> list[Backend]:
    out: list[Backend] = []
    for name in names:
        if name == "sqlite":
            path = workdir / "memory.db"
            out.append(
                Backend(
                    name="SQLite (file, WAL)",
                    open=lambda p=path: MemoryStore.sqlite(p, embedder=embedder, policy=POLICY),
                )
            )
        elif name == "postgres":
            schema = f"bench_memory_{uuid.uuid4().hex[:8]}"
            try:
                import psycopg

                psycopg.connect(PG_DSN, connect_timeout=3).close()
            except Exception as exc:  # report and skip the backend
                log(f"skipping Postgres at {PG_DSN}: {exc}")
                continue

            def drop(schema: str = schema) -> None:
                import psycopg

                with psycopg.connect(PG_DSN, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]

            out.append(
                Backend(
                    name="Postgres 5432 (BYTEA + numpy)",
                    open=lambda s=schema: MemoryStore.postgres(
                        PG_DSN,
                        schema=s,
                        pgvector=False,
                        embedder=embedder,
                        policy=POLICY,
                        secret=BENCH_SECRET,
                    ),
                    cleanup=drop,
                )
            )
        elif name == "pgvector":
            try:
                import pgserver
            except ImportError:
                log("skipping pgvector: the pgserver wheel is not installed")
                continue
            server = pgserver.get_server(tempfile.mkdtemp(prefix="maitre-bench-pg-"), cleanup_mode="delete")
            uri = server.get_uri()
            out.append(
                Backend(
                    name="Postgres 16 + pgvector (pgserver)",
                    open=lambda u=uri: MemoryStore.postgres(
                        u,
                        schema="bench",
                        pgvector=True,
                        embedder=embedder,
                        policy=POLICY,
                        secret=BENCH_SECRET,
                    ),
                    cleanup=server.cleanup,
                )
            )
    return out


def load(store: MemoryStore, per_user: dict[str, list[Candidate]], batch: int = 1000) -> float:
    t0 = time.perf_counter()
    for user, candidates in per_user.items():
        for start in range(0, len(candidates), batch):
            store.apply_many(user, candidates[start : start + batch])
    return time.perf_counter() - t0


# -- measuring ---------------------------------------------------------------------------------------


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


Fetch = Callable[[str, str], list[tuple[str, str]]]


def evaluate(
    questions: list[dict[str, Any]],
    fetch: Fetch,
    profile: Callable[[str], set[tuple[str, str]]] | None = None,
) -> dict[str, float]:
    """recall@5 (mean fraction of expected facts in the top 5), all@5, and abstention accuracy.

    With `profile`, a fact also counts as found if it is in the user's always-loaded profile
    (seed 000's pipeline: profile at session start + top 5 retrieved for the request).
    """
    recalls, alls, abstain = [], [], []
    for q in questions:
        got = {(k, v.casefold()) for k, v in fetch(q["user"], q["question"])[:5]}
        if q["category"] == "abstention":
            abstain.append(1.0 if not got else 0.0)
            continue
        if profile is not None:
            got |= profile(q["user"])
        expect = {(k, v.casefold()) for k, v in q["expect"]}
        hit = len(expect & got)
        recalls.append(hit / len(expect))
        alls.append(1.0 if hit == len(expect) else 0.0)
    return {
        "recall@5": statistics.fmean(recalls),
        "all@5": statistics.fmean(alls),
        "abstain": statistics.fmean(abstain) if abstain else float("nan"),
        "n": len(recalls),
        "n_abstain": len(abstain),
    }


def profile_of(store: MemoryStore) -> Callable[[str], set[tuple[str, str]]]:
    def facts(user: str) -> set[tuple[str, str]]:
        return {(f.key, f.value.casefold()) for f in store.profile(user).facts}

    return facts


def hybrid_sweep(
    store: MemoryStore, questions: list[dict[str, Any]], thresholds: Sequence[float]
) -> list[Fetch]:
    """maitre's retrieve at several `min_similarity` values from one retrieval per question.

    Fusion drops a dense-only candidate below the threshold before taking the top k, and dropping
    it does not change the others' scores, so filtering a deep (k=50, no threshold) result list
    afterwards gives exactly what `retrieve(k=5, min_similarity=t)` returns.
    """
    deep = {
        (q["user"], q["question"]): store.retrieve(q["user"], q["question"], 50, min_similarity=-1.0)
        for q in questions
    }

    def at(threshold: float) -> Fetch:
        def fetch(user: str, query: str) -> list[tuple[str, str]]:
            hits = [h for h in deep[(user, query)] if h.lexical or (h.similarity or -1.0) >= threshold]
            return [(h.key, h.value) for h in hits[:5]]

        return fetch

    return [at(t) for t in thresholds]


def seed000_retrieve(store: MemoryStore) -> Fetch:
    """Seed 000's retriever: count query words that appear in `key value`; newest fact per key."""

    def fetch(user: str, query: str) -> list[tuple[str, str]]:
        words = set(re.findall(r"[a-z0-9]+", query.lower()))
        scored = []
        for f in store.facts(user):
            text = set(re.findall(r"[a-z0-9]+", f"{f.key} {f.value}".lower()))
            overlap = len(words & text)
            if overlap:
                scored.append((-overlap, f.key, f.value))
        return [(k, v) for _, k, v in sorted(scored)[:5]]

    return fetch


def lexical_only(store: MemoryStore) -> Fetch:
    def fetch(user: str, query: str) -> list[tuple[str, str]]:
        with store.backend.read() as db:
            seqs = store.backend.lexical(db, "default", user, query_terms(query), 5)
            rows = facts_by_seq(db, seqs)  # an ablation reads the internals on purpose
        return [(rows[s].key, rows[s].value) for s in seqs if s in rows]

    return fetch


def dense_only(store: MemoryStore, embedder: Any) -> Fetch:
    def fetch(user: str, query: str) -> list[tuple[str, str]]:
        facts = store.facts(user)
        if not facts:
            return []
        matrix = embedder.embed([fact_text(f.key, f.value) for f in facts])  # cached: no re-embedding
        sims = matrix @ embedder.embed_query(query)
        order = np.argsort(-sims)[:5]
        return [(facts[i].key, facts[i].value) for i in order if sims[i] >= store.min_similarity]

    return fetch


def candidates_for(facts: list[dict[str, Any]]) -> dict[str, list[Candidate]]:
    out: dict[str, list[Candidate]] = {}
    for f in facts:
        out.setdefault(f["user"], []).append(
            Candidate(key=f["key"], value=f["value"], valid_from=f["valid_from"], source=f["source"])
        )
    return out


# -- main ------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=os.environ.get("MAITRE_BENCH_QUICK") == "1")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--facts-per-user", type=int, default=None)
    parser.add_argument(
        "--backends", default=os.environ.get("MAITRE_BENCH_MEMORY_BACKENDS", "sqlite,postgres,pgvector")
    )
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--searches", type=int, default=400)
    parser.add_argument("--write-questions", action="store_true", help=f"(re)write {QUESTIONS_FILE}")
    args = parser.parse_args(argv)
    per_user = args.facts_per_user or (500 if args.quick else 10_000)

    if args.write_questions or not QUESTIONS_FILE.exists():
        write_labelled_set(build_labelled_set(), QUESTIONS_FILE)
        log(f"wrote the labelled set to {QUESTIONS_FILE}")
    labelled = read_labelled_set(QUESTIONS_FILE)
    answerable = [q for q in labelled.questions if q["category"] != "abstention"]
    log(
        f"labelled set: {len(labelled.users())} users, {len(labelled.facts)} facts, {len(answerable)} questions "
        f"+ {len(labelled.questions) - len(answerable)} abstention"
    )

    minilm = default_embedder()
    embedder = CachedEmbedder(MiniLMEmbedder(threads=2))  # bulk embedding of the loaded facts

    # 1. Recall in a small store (each user's ~25 facts).
    small = MemoryStore.sqlite(":memory:", embedder=embedder, policy=POLICY)
    load(small, candidates_for(labelled.facts))
    thresholds = (0.2, 0.25, 0.3, 0.35, 0.4)
    sweep_fetch = hybrid_sweep(small, labelled.questions, thresholds)
    sweep = [(t, evaluate(labelled.questions, f)) for t, f in zip(thresholds, sweep_fetch, strict=True)]
    default_t = small.min_similarity
    rows = [
        ("seed 000 word overlap (anchor)", evaluate(labelled.questions, seed000_retrieve(small))),
        ("BM25 only (FTS5)", evaluate(labelled.questions, lexical_only(small))),
        (f"MiniLM only (cosine >= {default_t})", evaluate(labelled.questions, dense_only(small, embedder))),
        (
            f"maitre hybrid (BM25 + MiniLM, RRF, >= {default_t})",
            evaluate(labelled.questions, lambda u, q: [(h.key, h.value) for h in small.retrieve(u, q, 5)]),
        ),
        (
            "profile + hybrid top 5 (seed 000 pipeline)",
            evaluate(
                labelled.questions,
                lambda u, q: [(h.key, h.value) for h in small.retrieve(u, q, 5)],
                profile_of(small),
            ),
        ),
    ]

    # 2. Latency and haystack recall at scale.
    rng = random.Random(2026)
    users = [f"user{u:02d}" for u in range(args.users)]
    big: dict[str, list[Candidate]] = {u: [] for u in users}
    for f in labelled.facts:
        if f["user"] in big:
            big[f["user"]].append(
                Candidate(key=f["key"], value=f["value"], valid_from=f["valid_from"], source=f["source"])
            )
    for user in users:
        while len(big[user]) < per_user:
            key, value = filler_fact(rng)
            big[user].append(
                Candidate(
                    key=key,
                    value=value,
                    valid_from=f"2025-{rng.randint(1, 12):02d}-01",
                    source="import:history",
                )
            )
    total = sum(len(v) for v in big.values())
    log(f"embedding the {total:,} facts once (MiniLM int8, 2 threads)...")
    embedder.warm([fact_text(c.key, c.value) for cs in big.values() for c in cs])
    haystack_q = [q for q in labelled.questions if q["user"] in big]
    filler_q = (
        [f"who is my {r} from {c}?" for r in RELATIONS for c in CITIES[:6]]
        + [f"what did I buy from {s}?" for s in SHOPS]
        + [f"when is the {t} review?" for t in TOPICS]
    )
    queries = [(q["user"], q["question"]) for q in haystack_q]
    while len(queries) < args.searches:
        queries.append((rng.choice(users), rng.choice(filler_q)))

    results = []
    with tempfile.TemporaryDirectory(prefix="maitre-memory-bench-") as tmp:
        for backend in make_backends(args.backends.split(","), embedder, Path(tmp)):
            try:
                store = backend.open()
                log(f"{backend.name}: loading {total:,} facts...")
                load_s = load(store, big)
                log(f"{backend.name}: loaded in {load_s:.1f} s; measuring")
                for user in users:  # warm each user's vector cache (the cold load is reported apart)
                    store.retrieve(user, "warm up")
                cold = []
                fresh = backend.open()
                for user in users[:3]:
                    cold.append(timed(lambda u=user, f=fresh: f.retrieve(u, "who is my college friend?")))
                fresh.close()
                writes = []
                for i in range(args.writes):
                    user = users[i % len(users)]
                    key, value = filler_fact(rng)
                    value = f"{value} (note {uuid.uuid4().hex[:6]})"
                    writes.append(
                        timed(
                            lambda u=user, k=key, v=value, st=store: st.write(u, k, v, "2026-11-01", "bench")
                        )
                    )
                searches = [timed(lambda u=u, q=q, st=store: st.retrieve(u, q, 5)) for u, q in queries]
                hay = evaluate(
                    haystack_q, lambda u, q, st=store: [(h.key, h.value) for h in st.retrieve(u, q, 5)]
                )
                hay_profile = evaluate(
                    haystack_q,
                    lambda u, q, st=store: [(h.key, h.value) for h in st.retrieve(u, q, 5)],
                    profile_of(store),
                )
                results.append((backend.name, load_s, writes, searches, cold, hay, hay_profile))
                store.close()
            finally:
                backend.cleanup()

    q_embed = [timed(lambda q=q: minilm.embed_query(q)) for _, q in queries[:200]]

    # -- report ----------------------------------------------------------------------------------------
    print(
        f"\nmemory_bench: {len(users)} users x {per_user:,} facts = {total:,} facts per store; "
        f"{args.writes} writes, {len(queries)} searches (k=5); goals: write <= {GOAL_MS:.0f} ms, "
        f"search <= {GOAL_MS:.0f} ms"
    )
    print(
        f"{'backend':36} {'write p50':>10} {'write p99':>10} {'search p50':>11} {'search p99':>11} "
        f"{'p50/goal':>9} {'cold search':>12} {'load':>8}"
    )
    for name, load_s, writes, searches, cold, *_ in results:
        print(
            f"{name:36} {pct(writes, 0.5):8.2f}ms {pct(writes, 0.99):8.2f}ms {pct(searches, 0.5):9.2f}ms "
            f"{pct(searches, 0.99):9.2f}ms {max(pct(writes, 0.5), pct(searches, 0.5)) / GOAL_MS:8.2f}x "
            f"{statistics.fmean(cold):10.1f}ms {load_s:7.0f}s"
        )
    print(
        f"{'(MiniLM query embedding alone)':36} {'':>10} {'':>10} {pct(q_embed, 0.5):9.2f}ms {pct(q_embed, 0.99):9.2f}ms"
    )

    n_q = rows[0][1]["n"]
    print(
        f"\nretrieval on the labelled set: {n_q} questions ({len(labelled.users())} users; "
        f"single-fact and multi-fact, answers are current values after moves/replays) "
        f"+ {rows[0][1]['n_abstain']} abstention questions"
    )
    print(
        f"{'retriever (small store: each user ~25 facts)':46} {'recall@5':>9} {'all@5':>7} {'abstain':>8} {'vs anchor':>10}"
    )
    anchor = rows[0][1]["recall@5"]
    for name, r in rows:
        print(
            f"{name:46} {r['recall@5']:9.3f} {r['all@5']:7.3f} {r['abstain']:8.3f} {r['recall@5'] / anchor:9.2f}x"
        )
    print(f"{'maitre hybrid, min_similarity sweep':46}")
    for threshold, r in sweep:
        print(
            f"{'  min_similarity = ' + str(threshold):46} {r['recall@5']:9.3f} {r['all@5']:7.3f} {r['abstain']:8.3f}"
        )
    for name, *_, hay, hay_profile in results:
        label = f"haystack {per_user:,}/user, {name.split(' (')[0]}"
        print(f"{label:46} {hay['recall@5']:9.3f} {hay['all@5']:7.3f} {hay['abstain']:8.3f}   ({hay['n']} q)")
        print(
            f"{'  ... + profile (seed 000 pipeline)':46} {hay_profile['recall@5']:9.3f} {hay_profile['all@5']:7.3f}"
        )


if __name__ == "__main__":
    main()
