"""Multi-session conversation sets for long-term memory: our own, generated, in English and Chinese.

A user talks with an assistant over many sessions (days apart). Most turns are small talk; some state facts
about the user, and some later facts replace earlier ones (a move, a new job). After the last session come
questions, each asked in other words than the fact, whose evidence is the user turn that states the fact as it
now stands. `make(seed)` builds one set: seed 1 is the development set (recall weights were chosen on it),
seed 2 the test set that bench/memory.py reports.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DAY = 86400.0

# (statement, updated statement or '', question): the question shares few words with the statements
FACTS_EN = [
    ("I'm allergic to peanuts, so I have to check every label.", "", "What food must I stay away from?"),
    ("My sister Emma is getting married in June.", "", "Whose wedding is coming up in my family?"),
    (
        "I live in Paris, near the Canal Saint-Martin.",
        "We finally moved to Lyon last week, the new flat is great.",
        "Which city is my home now?",
    ),
    (
        "I work as a nurse in a children's hospital.",
        "I quit the hospital and started teaching biology at a school.",
        "What is my current job?",
    ),
    ("I have a golden retriever called Biscuit.", "", "What kind of pet do I own and what is its name?"),
    ("I'm training for the Berlin marathon in September.", "", "Which race am I preparing for?"),
    ("I drive a small red Fiat.", "I sold the Fiat and bought an electric Renault Zoe.", "What car do I have?"),
    ("I'm vegetarian since last year.", "", "Do I eat meat?"),
    ("My daughter Lucie just started school.", "", "How old is my child roughly and what is she doing?"),
    (
        "I'm learning Japanese on weekends.",
        "I gave up Japanese and switched to Italian lessons.",
        "Which language am I studying?",
    ),
    ("I can't stand horror films, they give me nightmares.", "", "What kind of movies should you never suggest to me?"),
    ("My favourite dish is my grandmother's mushroom risotto.", "", "What meal do I like most?"),
    ("I play the cello in an amateur orchestra.", "", "Which instrument do I play?"),
    ("My birthday is on the 3rd of March.", "", "When should you wish me many happy returns?"),
    ("I'm afraid of flying, I take the train whenever I can.", "", "How do I prefer to travel long distances?"),
    ("We are saving up to buy a house by the sea.", "", "What big purchase am I planning?"),
    ("My partner's name is Karim and he is a chef.", "", "Who do I live with and what does he do?"),
    ("I take medication for high blood pressure every morning.", "", "Do I have any health condition to remember?"),
    ("I support the football club Olympique Lyonnais.", "", "Which team do I cheer for?"),
    ("I'm lactose intolerant.", "", "Can I drink milk?"),
]
FACTS_ZH = [
    ("我对花生过敏，买东西都要看配料表。", "", "我不能吃什么东西？"),
    ("我住在杭州西湖附近。", "我们上周搬到成都了，新家很不错。", "我现在住在哪个城市？"),
    ("我在一家医院当护士。", "我辞职了，现在在中学教生物。", "我现在做什么工作？"),
    ("我养了一只叫豆豆的柯基。", "", "我家的宠物是什么？叫什么名字？"),
    ("我在准备九月份的北京马拉松。", "", "我在为哪场比赛做训练？"),
    ("我开一辆红色的小轿车。", "我把旧车卖了，买了一辆电动车。", "我现在开什么车？"),
    ("我从去年开始吃素。", "", "我吃肉吗？"),
    ("我周末在学日语。", "日语太难了，我改学意大利语了。", "我在学哪门外语？"),
    ("我的生日是三月三号。", "", "哪天应该祝我生日快乐？"),
    ("我害怕坐飞机，能坐高铁就坐高铁。", "", "我出远门喜欢怎么走？"),
]
SMALL_TALK_EN = [
    "The weather was grey again today.",
    "I watched a documentary about octopuses last night.",
    "Work was busy but fine.",
    "Can you suggest a podcast for my commute?",
    "I tried a new coffee shop this morning.",
    "My phone battery dies so fast lately.",
    "I should really clean my desk.",
    "Traffic was terrible today.",
    "I read a few chapters of a mystery novel.",
    "What's a good stretch for a stiff neck?",
    "I'm thinking about repainting the kitchen.",
    "The neighbours had a party until midnight.",
    "I finally fixed the squeaky door.",
    "Do you know any quick pasta recipes?",
    "I went for a walk in the park.",
    "I need a gift idea for a colleague.",
    "My laptop needs an update again.",
    "It rained all afternoon.",
]
SMALL_TALK_ZH = [
    "今天又是阴天。",
    "昨晚看了一部关于章鱼的纪录片。",
    "工作挺忙的，但还好。",
    "能推荐一个通勤听的播客吗？",
    "今天早上去了一家新开的咖啡店。",
    "最近手机电池掉电好快。",
    "我真该收拾一下书桌了。",
    "今天路上特别堵。",
    "读了几章推理小说。",
    "脖子僵硬有什么好的拉伸动作？",
    "我在考虑重新粉刷厨房。",
    "邻居开派对开到半夜。",
]
REPLY_EN = ["That sounds good.", "I see, thanks for telling me.", "Here is an idea you might like.", "Noted!"]
REPLY_ZH = ["听起来不错。", "明白了，谢谢告诉我。", "给你一个建议。", "好的！"]


@dataclass
class Question:
    text: str
    evidence: set[tuple[int, int]]  # (session, message index) of the user turn stating the fact as it now stands
    lang: str


@dataclass
class MemorySet:
    sessions: list[list[dict]]  # each: messages {'role', 'content'}
    times: list[float]  # each session's start (Unix seconds)
    questions: list[Question]
    now: float  # when the questions are asked


def make(seed: int, sessions: int = 40, turns: int = 8, start: float = 1.7e9) -> MemorySet:
    """A set of `sessions` sessions of about `turns` user turns each (see the module docstring)."""
    rng = random.Random(seed)
    facts = [(f, "en") for f in FACTS_EN] + [(f, "zh") for f in FACTS_ZH]
    # each fact is stated in a random session of the first half; an update in a later one
    plan: dict[int, list[tuple[str, int, str]]] = {}  # session -> [(text, fact number, 'first'|'update')]
    for n, ((first, update, _), _lang) in enumerate(facts):
        s1 = rng.randrange(0, sessions // 2)
        plan.setdefault(s1, []).append((first, n, "first"))
        if update:
            s2 = rng.randrange(s1 + 1, sessions)
            plan.setdefault(s2, []).append((update, n, "update"))
    out: list[list[dict]] = []
    times: list[float] = []
    evidence: dict[int, tuple[int, int]] = {}
    for s in range(sessions):
        zh_session = rng.random() < 0.3
        talk, replies = (SMALL_TALK_ZH, REPLY_ZH) if zh_session else (SMALL_TALK_EN, REPLY_EN)
        user_turns = [rng.choice(talk) for _ in range(turns)]
        for text, n, _kind in plan.get(s, []):
            user_turns.insert(rng.randrange(0, len(user_turns) + 1), (text, n))  # type: ignore[arg-type]
        messages: list[dict] = []
        for turn in user_turns:
            if isinstance(turn, tuple):
                text, n = turn
                evidence[n] = (s, len(messages))  # the latest statement wins: sessions are in order
            else:
                text = turn
            messages.append({"role": "user", "content": text})
            messages.append({"role": "assistant", "content": rng.choice(replies)})
        out.append(messages)
        times.append(start + s * 2 * DAY + rng.randrange(0, 3600))
    questions = [Question(f[2], {evidence[n]}, lang) for n, (f, lang) in enumerate(facts)]
    return MemorySet(out, times, questions, start + sessions * 2 * DAY)
