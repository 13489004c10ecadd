#!/usr/bin/env python3
"""Synthetic long-memory chat set for ctxgate's archive recall (development only).

Writes OUTDIR/history.jsonl, OUTDIR/queries.jsonl, OUTDIR/evidence.json,
OUTDIR/categories.json and OUTDIR/answers.json. See README.md in this directory.

Everything is derived from --seed; the same arguments always give byte-identical files.
--style natural asks the same questions in natural paraphrases (the history, evidence and
categories stay the same). Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import sys
from pathlib import Path

# --------------------------------------------------------------------------------------------
# Calendar
# --------------------------------------------------------------------------------------------

END_DATE = dt.date(2026, 10, 31)
# About 14 months of history per conversation; the exact start varies per conversation.
EARLIEST_START = dt.date(2025, 8, 20)
QUERY_TIME = dt.datetime(2026, 11, 2, 9, 0, 0, tzinfo=dt.timezone.utc)
MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]

# Planted facts (= questions) per conversation, by category: 25 in all.
CATEGORY_COUNTS = {"single": 11, "update": 5, "multi": 5, "temporal": 4}

# --------------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------------

V: dict[str, list[str]] = {
    # people and places
    "name": [
        "Laura", "Marco", "Priya", "Tom", "Aisha", "Daniel", "Sofia", "Ben", "Mei", "Lucas",
        "Hannah", "Omar", "Chloe", "Jonas", "Nadia", "Ethan", "Ines", "Kofi", "Rosa", "Felix",
        "Amara", "Leo", "Yuki", "Grace", "Mateo", "Zara", "Oscar", "Elena", "Ruth", "Theo",
        "Maya", "Ivan", "Clara", "Raj", "Freya", "Hugo", "Lena", "Nora", "Tariq", "Greta",
    ],
    "city": [
        "Lisbon", "Porto", "Berlin", "Hamburg", "Vienna", "Prague", "Krakow", "Dublin",
        "Edinburgh", "Manchester", "Lyon", "Marseille", "Barcelona", "Valencia", "Seville",
        "Milan", "Turin", "Bologna", "Amsterdam", "Rotterdam", "Copenhagen", "Stockholm", "Oslo",
        "Helsinki", "Zurich", "Geneva", "Brussels", "Ghent", "Munich", "Budapest", "Athens",
        "Toronto", "Montreal", "Boston", "Seattle", "Melbourne",
    ],
    "country": [
        "Portugal", "Japan", "Morocco", "Iceland", "Greece", "Mexico", "Vietnam", "Norway",
        "Croatia", "Peru", "Canada", "Georgia", "Slovenia", "Sri Lanka", "Chile", "Albania",
    ],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "season": ["spring", "summer", "autumn"],
    "count": ["two", "four", "six", "eight", "ten"],
    "minutes": ["10", "15", "20", "25", "30", "40", "45"],
    "grams": ["100", "150", "200", "250", "400", "500"],
    "price": ["12", "25", "40", "60", "85", "120", "150", "200"],
    # cooking
    "ingredient": [
        "chickpeas", "spinach", "sweet potatoes", "mushrooms", "courgettes", "aubergine",
        "red lentils", "leftover rice", "tofu", "chicken thighs", "salmon", "halloumi",
        "cauliflower", "butternut squash", "kale", "feta", "black beans", "leeks", "peppers",
        "cherry tomatoes", "broccoli", "eggs", "paneer", "gnocchi", "cabbage", "prawns",
    ],
    "meal": ["weeknight dinner", "lunch", "one-pot dinner", "side dish", "packed lunch", "brunch"],
    "dish": [
        "risotto", "curry", "stew", "frittata", "stir-fry", "traybake", "soup", "pasta bake",
        "salad", "chilli", "tagine", "noodle bowl", "pie", "shakshuka", "dal", "fried rice",
    ],
    "kitchen_tool": [
        "air fryer", "stand mixer", "pressure cooker", "mandoline", "rice cooker",
        "food processor", "cast-iron skillet", "immersion blender",
    ],
    "herb": ["coriander", "parsley", "basil", "dill", "mint", "chives"],
    "nut": ["almonds", "walnuts", "hazelnuts", "pine nuts", "pumpkin seeds", "sesame seeds"],
    "appliance": ["oven", "slow cooker", "air fryer", "microwave"],
    # work
    "project": [
        "the roadmap", "the vendor migration", "the onboarding revamp", "the pricing review",
        "the annual report", "the client pitch", "the data clean-up", "the new intranet",
        "the audit", "the rebrand", "the warehouse rollout", "the customer survey",
    ],
    "meeting": [
        "stand-up", "one-to-one", "quarterly review", "all-hands", "planning session", "retro",
        "budget meeting", "steering committee", "kick-off",
    ],
    "work_doc": [
        "slide deck", "status report", "proposal", "project plan", "handover note",
        "budget spreadsheet", "risk register", "briefing paper",
    ],
    # coding
    "lang": ["Python", "Rust", "TypeScript", "Go", "Java", "Kotlin", "SQL", "Bash"],
    "code_thing": [
        "a regex", "a SQL query", "a unit test", "a Dockerfile", "a CSV parser",
        "a REST endpoint", "a bash script", "a CI workflow", "a database migration",
        "a cron job", "a config loader",
    ],
    "bug": [
        "an off-by-one error", "a race condition", "a memory leak", "a timezone bug",
        "a null pointer crash", "a flaky test", "an encoding issue", "a deadlock",
    ],
    "dev_tool": ["git", "Docker", "VS Code", "pytest", "Postgres", "Redis", "cargo", "npm"],
    # travel
    "transport": ["train", "overnight bus", "ferry", "sleeper train", "coach"],
    "travel_item": [
        "power bank", "packing cubes", "travel adapter", "neck pillow", "rain jacket",
        "reusable water bottle", "foldable daypack",
    ],
    # screen
    "show": [
        "The Long Shore", "Harbour Lights", "Night Shift Diaries", "Glass Orchard",
        "The Cartographers", "Low Tide", "Paper Kingdoms", "Signal Lost", "The Quiet Year",
        "Northbound", "Saltmarsh Story", "Kingfisher Road",
    ],
    "genre": ["thriller", "sci-fi film", "romcom", "documentary", "crime drama", "horror film", "animated film"],
    "movie": [
        "The Last Lighthouse", "Orbit of Ash", "Summer in Vigo", "Red Meridian",
        "The Clockmaker's Daughter", "Small Hours", "Iron Lullaby", "A Map of Rivers",
        "Northern Static", "The Glass Bridge", "Saltwater Kings", "Midnight Terminal",
        "Paper Moons", "The Hollow Field", "Seven Winters", "Blue Monsoon",
    ],
    # sport and health
    "sport": ["tennis", "football", "badminton", "climbing", "swimming", "squash", "padel"],
    "exercise": ["squats", "lunges", "planks", "deadlifts", "push-ups", "hill sprints"],
    "body_part": ["knee", "ankle", "wrist", "shoulder", "lower back", "hamstring", "elbow"],
    "symptom": [
        "headaches", "back ache", "poor sleep", "neck stiffness", "heartburn",
        "sore throats", "itchy eyes",
    ],
    "supplement": ["vitamin D", "magnesium", "iron", "B12", "omega-3"],
    # shopping
    "item": [
        "winter coat", "pair of trainers", "rucksack", "desk lamp", "blender", "raincoat",
        "office chair", "duvet", "suitcase", "kettle", "pair of boots",
    ],
    "occasion": [
        "a friend's housewarming", "a colleague's leaving do", "a secret Santa",
        "a retirement card", "a christening", "a dinner invitation",
    ],
    # weather
    "weather": ["heatwave", "storm", "fog", "cold snap", "drizzle", "hailstorm", "wind"],
    # books
    "book_genre": [
        "historical fiction", "crime", "sci-fi", "memoir", "fantasy", "poetry",
        "literary fiction", "popular science",
    ],
    "book": [
        "The Salt Road", "A Winter of Foxes", "Nine Bright Shiners", "The Glass Archive",
        "Letters from Harrow", "The Orchard Keeper's Son", "Blue Hour", "What the River Took",
        "The Ninth Lantern", "A Field Guide to Leaving", "Cold Harbour", "The Paper Garden",
        "Small Gods of Tuesday", "The Ferryman's Ledger", "Lanterns at Low Water",
        "The Weight of Snow", "An Atlas of Small Things", "The Copper Coast",
    ],
    "author": [
        "Mira Castell", "Jonah Pryce", "Ada Lindqvist", "Tomas Reyes", "Helen Achterberg",
        "Sunil Varma", "Clare Devlin", "Rafael Ostrowski", "Noor Haddad", "Ellis Grant",
        "Ines Moreau", "Kwame Asante",
    ],
    # music
    "band": [
        "Marigold Radio", "The Low Orbits", "Saltmarsh", "Kite Season", "Hollow Pines",
        "Copper Tides", "The Night Ferry", "Luna Bay", "Brass Hearts", "Orchard Lights",
        "Static Bloom", "The Velvet Hours",
    ],
    "music_genre": ["jazz", "indie", "techno", "folk", "classical", "hip hop", "soul"],
    "venue": [
        "the Roundhouse", "the Academy", "the Corn Exchange", "the Jazz Cellar",
        "the Old Market", "the Arena", "the Boiler Room", "the Cathedral",
    ],
    # home
    "chore": [
        "descaling the kettle", "clearing the gutters", "bleeding the radiators",
        "fixing a dripping tap", "painting the hallway", "sorting out the loft",
        "regrouting the shower", "defrosting the freezer",
    ],
    "garden_crop": ["tomatoes", "basil", "runner beans", "strawberries", "chillies", "courgettes"],
    # money
    "bill": ["energy bill", "phone bill", "council tax", "home insurance", "water bill"],
    "app": ["a budgeting app", "a habit tracker", "a meditation app", "a to-do app"],
}

# --------------------------------------------------------------------------------------------
# Filler: topics (user openings, user follow-ups, assistant sentences)
# --------------------------------------------------------------------------------------------

TOPICS: dict[str, dict[str, list[str]]] = {
    "cooking": {
        "ask": [
            "Can you suggest a quick {meal} I could make with {ingredient} and {ingredient2}? I don't want to go to the shop again.",
            "I need to use up some {ingredient} this week. Any ideas for a {meal} that isn't too heavy?",
            "What's the best way to cook {ingredient} so nothing ends up soggy? Mine always does.",
            "I'm making {dish} for {count} people on {weekday}. How far ahead can I prep it without it going sad?",
            "Is a {kitchen_tool} worth buying, or is it one of those gadgets that just sits in a cupboard?",
            "How do I stop my {dish} from tasting bland? I follow the instructions and it's still flat.",
            "I want to eat more vegetables without it feeling like a chore. Where do I start with {ingredient}?",
            "What's a good {dish} I can batch cook on Sunday and eat through the week?",
        ],
        "follow": [
            "Would {ingredient2} work instead?",
            "How long does that keep in the fridge?",
            "Nice. Can I freeze the leftovers?",
            "What would you serve on the side?",
            "Could I do it in the {appliance} instead?",
            "And roughly how long does the whole thing take?",
            "Is there a way to make it a bit spicier without overdoing it?",
            "Any tips for making it look less beige on the plate?",
        ],
        "say": [
            "A simple option is a {dish}: soften an onion, add the {ingredient}, then let everything simmer for about {minutes} minutes.",
            "Roasting the {ingredient} at a high heat gives you much more colour and flavour than boiling it.",
            "If you're short on time, a traybake with {ingredient} and {ingredient2} is hard to beat and only needs one tin.",
            "Season in layers: a pinch of salt at each stage makes a bigger difference than adding it all at the end.",
            "A squeeze of lemon or a splash of vinegar right before serving usually fixes a flat-tasting dish.",
            "Most cooked dishes keep for three to four days in the fridge in an airtight container.",
            "It freezes well; cool it quickly, portion it, and label the container with the date.",
            "For {count} people I'd plan on roughly {grams} grams of {ingredient} per person.",
            "You can make the sauce a day ahead, which often improves the flavour anyway.",
            "A {kitchen_tool} is worth it if you'd use it every week; otherwise a sharp knife and a heavy pan cover most jobs.",
            "Toasted {nut} or a handful of fresh {herb} on top adds texture and brightness.",
            "Serve it with a crisp green salad or some crusty bread to mop up the sauce.",
            "Don't crowd the pan, otherwise everything steams instead of browning.",
            "Chilli flakes added with the garlic give gentle heat; fresh chilli at the end gives a sharper kick.",
            "Pat the {ingredient} dry before cooking; moisture is the main reason things go soggy.",
        ],
    },
    "work": {
        "ask": [
            "I've got a {meeting} on {weekday} about {project} and I'm not prepared at all. How should I structure my update?",
            "Can you help me write a polite email pushing back on a deadline for {project}?",
            "My {work_doc} for {project} is way too long. How do I cut it down without losing the important parts?",
            "Everyone keeps booking meetings over my focus time. How do I protect a few hours a day?",
            "How do I say no to extra work without sounding like I'm not a team player?",
            "I need to present {project} to senior people next week. Any tips for keeping it short and clear?",
            "What's a good way to run a {meeting} that doesn't overrun every single time?",
            "Work has been chaotic with {project}. How do I prioritise when everything is urgent?",
        ],
        "follow": [
            "Could you make that sound a bit less formal?",
            "What if they say the deadline can't move?",
            "How many slides would you aim for?",
            "Should I send the {work_doc} before the meeting or after?",
            "That's helpful. Can you give me a short opening line?",
            "Would a shared tracker help or is that overkill?",
            "What should I do if the conversation goes off track?",
        ],
        "say": [
            "Start with the decision you need from them, then give the two or three facts that support it.",
            "A structure that works well is: where we are, what's blocking us, and what you need from the room.",
            "For the email, acknowledge the request, explain the trade-off, and propose a concrete new date.",
            "Cut anything from the {work_doc} that doesn't change what the reader will decide or do.",
            "Blocking focus time in your calendar as a recurring event makes it much easier to decline clashes.",
            "You can say no to the task while saying yes to the goal, for example by suggesting who else could help.",
            "Aim for one idea per slide and keep detailed numbers in an appendix.",
            "Send a short agenda before the {meeting} with the outcome you want written at the top.",
            "When everything feels urgent, ask which item would hurt most if it slipped by a week.",
            "Timeboxing each agenda item, even loosely, stops most meetings from overrunning.",
            "End with a clear list of owners and dates so nothing falls through the cracks.",
            "If the deadline really can't move, negotiate on scope instead: what is the smallest useful version?",
            "It's fine to keep the tone friendly; clarity matters more than formality here.",
        ],
    },
    "coding": {
        "ask": [
            "Can you help me write {code_thing} in {lang}? I keep getting it slightly wrong.",
            "I think I've got {bug} somewhere in my {lang} code. How would you go about tracking it down?",
            "What's the cleanest way to structure {code_thing} so it's easy to test?",
            "My tests pass locally but fail in CI. Where should I start looking?",
            "Is it worth learning {lang} properly, or should I stick with what I know?",
            "How do I undo my last commit in {dev_tool} without losing the changes?",
            "Our {dev_tool} setup is getting messy. Any tips for keeping it sane as the project grows?",
        ],
        "follow": [
            "How would I write a test for that?",
            "What if the input is empty?",
            "Could you show a version without the extra dependency?",
            "Is there a performance cost to doing it that way?",
            "Why does that fix the problem, though?",
            "Can you explain the error message in plainer words?",
        ],
        "say": [
            "First make the failure reproducible with the smallest possible input; that usually points straight at the cause.",
            "With {bug}, logging the values just before the failure is often quicker than stepping through a debugger.",
            "I'd split it into a pure function that does the work and a thin layer that handles input and output.",
            "Tests that pass locally but fail in CI are usually about environment: time zones, file ordering, or missing variables.",
            "In {lang} the idiomatic approach is to keep the error handling explicit rather than hiding it.",
            "A soft reset keeps your changes staged, so nothing is lost and you can recommit when ready.",
            "Pin your dependency versions and commit the lock file so everyone builds the same thing.",
            "An empty input should be handled at the boundary, returning early with a clear result.",
            "The performance difference is negligible unless you're doing this in a hot loop with large inputs.",
            "Write the test first for the case that broke; then it can never silently come back.",
            "Keeping {code_thing} small and boring is a feature: future you will thank you.",
            "The error means the value wasn't what the code assumed, so check where it was last set.",
        ],
    },
    "travel": {
        "ask": [
            "I'm thinking about a long weekend in {city}. What's the best way to spend three days there?",
            "Is it better to take the {transport} or fly for a trip of about six hours?",
            "What should I pack for a week of changeable weather in {city}?",
            "Any tips for getting through airport security faster? I always end up in the slow queue.",
            "How far in advance should I book trains to get the cheap fares?",
            "I have a twelve-hour layover in {city}. Is it worth leaving the airport?",
            "What's a good way to avoid tourist traps when eating out in {city}?",
        ],
        "follow": [
            "Is a {travel_item} worth bringing?",
            "What about getting from the airport into the centre?",
            "Would you recommend staying central or a bit outside?",
            "How much cash should I carry?",
            "Is that doable without hiring a car?",
            "What if it rains the whole time?",
        ],
        "say": [
            "For three days I'd spend one on the old centre, one on a neighbourhood locals actually live in, and one on a day trip.",
            "The {transport} often wins once you count the time getting to and through the airport.",
            "Pack layers rather than one heavy item, plus a light waterproof; weather there can turn quickly.",
            "A {travel_item} takes almost no space and saves a lot of hassle.",
            "Booking six to eight weeks ahead usually gets the cheapest fares, especially on popular routes.",
            "Twelve hours is enough to leave the airport if you budget three hours for getting back through security.",
            "Walk two streets away from the main square before choosing where to eat; prices drop and quality often rises.",
            "Public transport from the airport is usually cheaper and quicker than a taxi at rush hour.",
            "Staying central costs more but saves time, which matters on a short trip.",
            "Most places take cards now, so a small amount of cash for markets and tips is plenty.",
            "Museums, covered markets and cafes make a rainy day in {city} surprisingly pleasant.",
        ],
    },
    "screen": {
        "ask": [
            "I just finished {show} and I need something similar. Any recommendations?",
            "Is {movie} worth watching or is it overhyped?",
            "I want a good {genre} for tonight, nothing too long. What would you pick?",
            "Why do so many series these days have eight episodes and then disappear for two years?",
            "Can you recommend a {genre} series that's actually finished, so I'm not left on a cliffhanger?",
            "My friends keep talking about {show}. Can I skip the first season?",
        ],
        "follow": [
            "Is it suitable to watch with my parents?",
            "How many episodes is it?",
            "Anything a bit lighter?",
            "Where can I stream it?",
            "Do I need to have seen the earlier ones?",
        ],
        "say": [
            "If you liked {show}, you'll probably enjoy something with the same slow-burn pacing and strong characters.",
            "{movie} divides people: the first half is gorgeous and slow, the ending is what everyone argues about.",
            "For a short {genre}, I'd pick something under two hours with good reviews from audiences, not just critics.",
            "Shorter seasons are partly about budgets: each episode now costs as much as a small film.",
            "A finished series is a great shout; you get the whole arc without waiting years for a resolution.",
            "You can skip the first season, but a couple of later plot points land better if you've seen it.",
            "It's mostly fine for family viewing, with a couple of scenes you might want to fast-forward.",
            "It's eight episodes of around forty minutes, so an easy weekend watch.",
            "It's available on most of the big streaming services, sometimes with a delay by region.",
            "A lighter option would be a comedy with short episodes you can dip in and out of.",
        ],
    },
    "fitness": {
        "ask": [
            "I want to get back into {sport} after a long break. How do I avoid overdoing it in the first few weeks?",
            "Can you give me a twenty-minute workout I can do at home with no equipment?",
            "Are {exercise} actually bad for your knees, or is that a myth?",
            "How many rest days should I take each week if I'm training four times?",
            "My legs are always sore after {sport}. Should I stretch before or after?",
            "What's a sensible way to build up to running 5k without getting injured?",
        ],
        "follow": [
            "What if I only have ten minutes?",
            "Should I do it every day?",
            "Is it normal to feel a bit dizzy afterwards?",
            "How do I know if I'm pushing too hard?",
            "Can I swap {exercise} for something else?",
        ],
        "say": [
            "Start at about half of what you think you can do and add ten percent each week.",
            "A quick circuit: {exercise}, planks, glute bridges and step-ups, forty seconds on and twenty off, four rounds.",
            "{exercise} are fine for healthy knees as long as your form is good and you build up gradually.",
            "Two rest days a week works for most people; one of them can be a gentle walk.",
            "Dynamic warm-ups before and static stretches after tend to work best.",
            "A run-walk plan over eight weeks is the classic way to reach 5k without niggles.",
            "If you can't hold a conversation, you're going harder than you need to for base fitness.",
            "Sleep and enough protein matter as much as the sessions themselves for recovery.",
            "Feeling light-headed can be about not eating beforehand or standing up too fast; take it easy.",
            "Ten focused minutes beats skipping entirely, so keep a short version in your back pocket.",
        ],
    },
    "health": {
        "ask": [
            "I've had {symptom} on and off for a week. Is that something to worry about?",
            "What's a realistic way to get more sleep when my evenings are packed?",
            "Is it worth taking {supplement} in winter?",
            "How much water should I actually be drinking? I hear different numbers everywhere.",
            "I spend all day at a desk and my posture is awful. Any simple fixes?",
            "How do I cut down on screen time before bed without feeling like I'm missing out?",
        ],
        "follow": [
            "When should I see a professional about it?",
            "Could stress be causing it?",
            "Is there anything I should avoid?",
            "How long before I'd notice a difference?",
            "Would an app help with that?",
        ],
        "say": [
            "Occasional {symptom} is common, but if it persists beyond a couple of weeks or gets worse, get it checked.",
            "Keeping the same wake-up time every day, even at weekends, does more for sleep than an early night now and then.",
            "{supplement} is commonly recommended in darker months, but check the dose and any interactions first.",
            "Thirst and pale-yellow urine are better guides than a fixed number of glasses.",
            "Raising your screen to eye level and getting up every half hour helps posture more than any gadget.",
            "Charging your phone outside the bedroom is the single most effective screen-time trick.",
            "Stress can absolutely show up physically, so it's worth noticing what else is going on.",
            "Most habits take a few weeks before you feel a clear difference, so give it time.",
            "I'm not a substitute for a professional, but those are reasonable first steps to try.",
        ],
    },
    "shopping": {
        "ask": [
            "I need a new {item} and there are way too many options. What should I look for?",
            "What's a good gift for {occasion}, around {price} pounds?",
            "Is it worth waiting for the sales to buy a {item}?",
            "I bought a {item} online and it doesn't fit. How annoying is it to return things these days?",
            "How do I stop impulse buying on my phone late at night?",
        ],
        "follow": [
            "What about something a bit cheaper?",
            "Which brands last longest?",
            "Is second-hand a good idea for that?",
            "Should I read the reviews or are they all fake now?",
            "How long do returns usually take to refund?",
        ],
        "say": [
            "For a {item}, focus on build quality and warranty; the extra features rarely get used.",
            "A thoughtful gift for {occasion} at that price is something consumable and nice: good coffee, a plant, or a book.",
            "Prices on a {item} often dip in late November and January, so waiting can save a fair bit.",
            "Most shops give you thirty days; keep the packaging and the receipt email until the refund lands.",
            "Removing saved card details from shopping apps adds just enough friction to stop late-night buys.",
            "Second-hand is great for sturdy things; just check photos carefully and ask about wear.",
            "Look for reviews that mention how the item held up after months, not just the first week.",
            "Refunds usually take three to ten working days once the return is received.",
        ],
    },
    "weather": {
        "ask": [
            "The forecast says a {weather} is coming this weekend. Should I cancel the barbecue?",
            "How do I keep the flat comfortable during this {weather} without spending a fortune?",
            "It's been grey for weeks and I feel flat. Does the weather really affect mood that much?",
            "Is it safe to cycle in this {weather}?",
            "What's the best way to dry laundry indoors when it's this damp?",
        ],
        "follow": [
            "What if it clears up by the afternoon?",
            "Would a dehumidifier help?",
            "How accurate are forecasts that far ahead?",
            "Any indoor alternatives?",
        ],
        "say": [
            "Forecasts more than three days out are rough guides, so I'd make a backup plan rather than cancel now.",
            "Keep blinds closed during the day and open windows on opposite sides at night to get a through-draught.",
            "Low light genuinely affects mood for many people; getting outside in the morning helps more than you'd think.",
            "In a {weather}, lights, bright layers and extra stopping distance matter most if you do ride.",
            "A dehumidifier dries clothes faster and stops condensation building up on the windows.",
            "A clothes airer near a slightly open window with the door closed works better than a radiator.",
            "If it clears later, you can still fire up the grill; just have a covered spot ready.",
        ],
    },
    "books": {
        "ask": [
            "I'm in a reading slump. Can you suggest some {book_genre} that's easy to get into?",
            "Have you heard of {book} by {author}? Is it worth reading?",
            "How do people read fifty books a year? I can barely manage ten.",
            "I keep buying books and not reading them. How do I get on top of the pile?",
            "Are audiobooks cheating, or do they count as reading?",
        ],
        "follow": [
            "Anything shorter?",
            "Is it part of a series?",
            "Would that work as an audiobook?",
            "What would you read after that?",
        ],
        "say": [
            "For a slump, pick something short and plot-driven; finishing one book quickly rebuilds momentum.",
            "{book} by {author} gets a lot of love for its atmosphere, though the middle section is slow for some readers.",
            "Heavy readers mostly read in small gaps: commutes, queues, ten minutes before sleep.",
            "Try a one-in, one-out rule: no new books until you've finished or abandoned one from the pile.",
            "Audiobooks absolutely count; comprehension is similar, it's just a different way in.",
            "It's a standalone, so you can pick it up without any homework.",
            "Giving yourself permission to abandon books you don't enjoy is the fastest way to read more.",
            "If you like {book_genre}, you might enjoy anything by {author} as a next step.",
        ],
    },
    "music": {
        "ask": [
            "I need a playlist for a long drive. Something like {band} but a bit more upbeat?",
            "What's a good way to get into {music_genre} if I've never really listened to it?",
            "Are vinyl records actually better sounding or is it nostalgia?",
            "I want to discover new music but the algorithm keeps feeding me the same stuff. Any ideas?",
            "Is it worth paying more for lossless streaming?",
        ],
        "follow": [
            "Which album would you start with?",
            "Any live recordings worth hearing?",
            "What about something more relaxed?",
            "Can you suggest a few similar artists?",
        ],
        "say": [
            "If you like {band}, I'd mix in some mid-tempo indie with big choruses for the motorway stretches.",
            "A good way into {music_genre} is a well-known compilation, then following the artists you like most.",
            "Vinyl is more about the ritual and the mastering than the format being objectively better.",
            "Local radio shows and record shop staff picks are great ways to escape the algorithm.",
            "Lossless is noticeable on good headphones in a quiet room; on the bus, much less so.",
            "Start with the album most people call their favourite, then go backwards through the catalogue.",
            "A relaxed option would be something acoustic or ambient with a steady tempo.",
        ],
    },
    "home": {
        "ask": [
            "I've been putting off {chore} for months. Is it a job I can do myself?",
            "What's the easiest way to keep a small flat tidy when I'm busy?",
            "The {garden_crop} on my balcony look sad and yellow. What am I doing wrong?",
            "Any cheap ways to make a rented place feel more homely?",
            "How often should I actually be cleaning things like the oven and the fridge?",
        ],
        "follow": [
            "What tools would I need?",
            "How long does it usually take?",
            "Is there a shortcut?",
            "What if I make it worse?",
            "Should I ask the landlord first?",
        ],
        "say": [
            "{chore} is very doable yourself with a free afternoon and a short video tutorial.",
            "Ten minutes of tidying every evening beats a big weekly clean in a small space.",
            "Yellow leaves on {garden_crop} usually mean overwatering or not enough feed; check the drainage first.",
            "Lamps instead of the main light, a couple of plants and a rug make a rental feel far cosier.",
            "A quick wipe of the fridge weekly and a deeper clean of the oven every few months is plenty for most homes.",
            "Basic tools, a bit of patience and a towel on the floor will cover most of it.",
            "For anything structural it's worth checking with the landlord, but small fixes are usually fine.",
        ],
    },
    "money": {
        "ask": [
            "My {bill} went up again. Is it worth switching provider?",
            "How do I start a budget that I'll actually stick to?",
            "Should I pay off my credit card first or build up some savings?",
            "Is {app} actually useful or is a spreadsheet just as good?",
            "How much should I keep in an emergency fund?",
        ],
        "follow": [
            "What if my income changes month to month?",
            "How often should I review it?",
            "Is there an easy first step?",
            "What would you cut first?",
        ],
        "say": [
            "Comparing your {bill} once a year takes twenty minutes and often saves a noticeable amount.",
            "The budgets that stick are simple: a few categories, automated transfers, and a weekly five-minute check.",
            "Paying off high-interest debt usually beats saving, but keep a small buffer for surprises.",
            "{app} helps if you like nudges; a spreadsheet is better if you enjoy tinkering.",
            "Three months of essential spending is a common target for an emergency fund.",
            "With irregular income, budget from your lowest typical month and treat extra as a bonus.",
            "Subscriptions are usually the easiest thing to trim first.",
        ],
    },
}

# More filler turns that reuse the words the questions ask about (doctor, team, book, live,
# office, recipe...) in ordinary chatter, so that matching a question's words is not enough.
for _topic, _kinds in {
    "cooking": {
        "ask": [
            "I want to try a new recipe this weekend that isn't pasta. Something a bit special but not fiddly?",
            "What dish would work for a dinner party where one guest is vegetarian?",
            "Which recipe books are actually worth owning? I mostly cook from the internet.",
        ],
        "follow": [
            "Is that recipe forgiving if I get the timings wrong?",
            "Could that work as a main dish for a party?",
        ],
        "say": [
            "A good recipe for a dinner party is one you can finish in the oven while you talk to people.",
            "Old family recipes are often the best because they were built for cooking every day.",
            "If a guest is allergic to anything, make the whole dish safe rather than a separate plate.",
        ],
    },
    "work": {
        "ask": [
            "My manager wants the {work_doc} by {weekday} and I haven't started. How do I get it done fast?",
            "The whole team is back in the office on {weekday}. How do I make the most of a day together?",
            "The company is restructuring {project} and everyone is nervous. How do I keep my team focused?",
            "How do I ask my manager for a clearer job title without sounding vain?",
        ],
        "follow": [
            "What if my manager disagrees?",
            "Should I bring it up in the office or over a call?",
            "How would the team take that?",
        ],
        "say": [
            "Managers usually appreciate a short written summary before a conversation, not after.",
            "An office day works best for the things that are hard remotely: planning, feedback and lunch together.",
            "In uncertain times, a team stays calmer when people know what's decided, what isn't, and when they'll hear more.",
            "A job title matters most when you talk to people outside the company, so it's fair to ask.",
            "New starters join faster when the team writes down the unwritten rules.",
        ],
    },
    "fitness": {
        "ask": [
            "Is a gym membership worth it if I only go twice a week?",
            "How do people train for a marathon with a full-time job?",
            "What's a good warm-up before a long run?",
            "Which team sports are good for beginners in their thirties?",
        ],
        "follow": [
            "Would the gym be better for that?",
            "How long should the long run be?",
        ],
        "say": [
            "A gym is worth it if it's on your way somewhere; distance is the biggest predictor of whether people go.",
            "Marathon plans usually build the long run by a kilometre or two a week.",
            "Most people who hurt themselves running simply did too much too soon.",
            "Team sports are great for motivation because other people are counting on you to turn up.",
        ],
    },
    "health": {
        "ask": [
            "Should I see a doctor about {symptom}, or is it too minor to bother them?",
            "How do I know if something is an allergy or just a cold that won't go away?",
            "Is there a sensible way to go to bed earlier when my brain won't switch off?",
            "Is it worth changing my diet to help with {symptom}?",
        ],
        "follow": [
            "What would the doctor want to know?",
            "Could it be something I'm allergic to?",
            "Does it matter what time I eat before bed?",
        ],
        "say": [
            "A doctor will want to know when it started, how often it happens, and what makes it better or worse.",
            "Allergies tend to come with itchy eyes or sneezing and don't usually bring a fever.",
            "Small, steady changes to your diet are easier to keep than big overhauls.",
            "A consistent wind-down routine before bed tells your body it's time to sleep.",
        ],
    },
    "screen": {
        "ask": [
            "Any movie recommendations for a cosy winter evening?",
            "Is {movie} worth seeing at the cinema or should I wait for streaming?",
            "Which films are actually worth a rewatch every year?",
        ],
        "follow": [
            "Is it better on the big screen?",
            "Anything similar I could rewatch with friends?",
        ],
        "say": [
            "Some films really do reward a rewatch, because you notice the details once you know the ending.",
            "Big, loud films are worth the cinema; quiet dramas are often better at home.",
            "A winter movie night works best with something long, warm and a bit nostalgic.",
        ],
    },
    "books": {
        "ask": [
            "Should I join a book club, or will it turn reading into homework?",
            "How many books is a realistic reading goal for someone who reads on the bus?",
            "What's a good book to read on a long trip?",
        ],
        "follow": [
            "Would that work for a book club?",
            "How long does it take to finish?",
        ],
        "say": [
            "A book club works best when the group picks shorter books and meets somewhere comfortable.",
            "A reading goal is useful as a nudge, but it shouldn't make you avoid long books.",
            "For a trip, pick something gripping that you can put down and pick up in short bursts.",
        ],
    },
    "music": {
        "ask": [
            "Do you know any good live albums? Studio recordings feel a bit flat to me lately.",
            "Is it too late to learn an instrument in my thirties?",
            "How do I find out which bands are playing live near me?",
        ],
        "follow": [
            "Which instrument would you start with?",
            "Is it worth seeing them live?",
        ],
        "say": [
            "Live albums capture something the studio version misses, especially with jazz and soul.",
            "Adults learn an instrument well because they practise deliberately; it's never too late.",
            "Venue mailing lists are the most reliable way to hear about bands playing live nearby.",
        ],
    },
    "home": {
        "ask": [
            "Do houseplants need feeding in winter, or should I leave them alone?",
            "How do I get the landlord to fix the boiler without it turning into a fight?",
            "Is it better to buy second-hand furniture or wait and save for new?",
            "Our flat gets really damp in winter. What actually helps?",
        ],
        "follow": [
            "Would that work in a rented flat?",
            "Which houseplant is hardest to kill?",
        ],
        "say": [
            "Most houseplants rest in winter, so water less and skip the feed until spring.",
            "Put repair requests to the landlord in writing with photos and a date; it keeps things calm.",
            "Solid second-hand furniture often outlasts cheap new pieces by years.",
            "In a damp flat, short bursts of airing and a steady low heat work better than blasting it.",
        ],
    },
    "travel": {
        "ask": [
            "Any tips for a long trip with lots of changes between trains?",
            "Is travel insurance worth it for a short trip?",
            "Where's good to stay in {city} for a few nights without spending a fortune?",
        ],
        "follow": [
            "Would you stay somewhere central for a short trip?",
            "Is it worth booking the stay in advance?",
        ],
        "say": [
            "On a long trip, keep the essentials in one small bag so changes are painless.",
            "For a short trip, insurance mainly matters for cancellations and medical costs.",
            "A short stay is usually better in a central neighbourhood with good transport.",
        ],
    },
    "money": {
        "ask": [
            "How much should I be putting aside each month for a holiday?",
            "Is it normal for rent to go up every single year?",
            "Are online savings accounts safe?",
        ],
        "follow": [
            "What if the holiday is only a few months away?",
            "How much of my pay should rent be?",
        ],
        "say": [
            "A separate pot for the holiday makes saving feel less like a sacrifice.",
            "A common rule of thumb is that rent shouldn't take more than about a third of take-home pay.",
            "Online savings accounts from regulated banks are protected in the same way as high-street ones.",
        ],
    },
    "shopping": {
        "ask": [
            "Is it worth buying a refurbished phone, or is that asking for trouble?",
            "What's a good birthday present for someone who says they want nothing?",
        ],
        "follow": [
            "Would that work as a birthday present?",
            "Is it worth paying more for the newer phone?",
        ],
        "say": [
            "Refurbished phones from a reputable seller usually come with a warranty and work like new.",
            "For someone who wants nothing, an experience or their favourite treat is a safe birthday present.",
        ],
    },
}.items():
    for _kind, _lines in _kinds.items():
        TOPICS[_topic][_kind].extend(_lines)

SMALLTALK = [
    "Slept badly, the neighbours were up late again.",
    "It's been one of those weeks, honestly.",
    "Finally a quiet evening at home.",
    "I had way too much coffee today.",
    "The bus was late again this morning, classic.",
    "Just got back from a walk, feeling a bit more human.",
    "I can't believe it's already {weekday}.",
    "Long day, but a good one.",
    "I've been procrastinating all afternoon.",
    "Rainy day here, perfect excuse to stay in.",
    "Quick one before I head out.",
    "Hope you don't mind a random question.",
    "I'm trying to be more organised this month.",
    "Weekend plans fell through, so I've got time to sort things out.",
]

GREETING = ["Hi!", "Hey.", "Hello again.", "Hey there.", "", ""]
GREETING_MORNING = ["Morning.", "Good morning!"]
GREETING_EVENING = ["Evening!", "Hi, evening."]

ASSIST_OPEN = [
    "Sure!", "Good question.", "Happy to help with that.", "Of course.",
    "Here's what I'd suggest.", "Absolutely.", "Great question.", "That makes sense.",
    "Let's sort that out.", "Right, a few thoughts.",
]
ASSIST_CLOSE = [
    "Want me to go into more detail on any of that?",
    "Let me know how it goes!",
    "Hope that helps.",
    "Shout if you'd like a shorter version.",
    "I can put together a checklist if that's useful.",
    "Happy to adjust if your situation is different.",
]
ACK = {
    "pos": [
        "That's lovely news!", "Congratulations, that's exciting.",
        "Oh nice, that sounds like a great change.", "Love that.", "That's brilliant to hear.",
        "How exciting!",
    ],
    "neu": [
        "Good to know, thanks for telling me.", "Noted!", "Ah, interesting.",
        "Thanks for the update.", "Got it.",
    ],
    "fun": [
        "Sounds like a great day!", "That sounds fun.", "Nice, glad you enjoyed it.",
        "Oh, that sounds like a good time.",
    ],
    "neg": [
        "Oh no, sorry to hear that.", "Ouch, that sounds rough.",
        "That's a pain, I hope it settles down soon.", "Sorry, that's frustrating.",
    ],
}
LEAD_IN = [
    "By the way, ", "Oh, before I forget: ", "Random update: ", "Quick bit of news: ", "",
    "So, ", "Unrelated, but ", "Life update: ", "",
]
TRANSITION = ["Anyway. ", "Anyway, back to it. ", "Right. ", "Back to my question: ", ""]

# --------------------------------------------------------------------------------------------
# Lexical distractors: sentences that reuse a question's words in unrelated contexts
# --------------------------------------------------------------------------------------------

DISTRACT: dict[str, list[str]] = {
    "rel": [
        "My {rel} sent me a video of a goat at work this morning, no context.",
        "I need to call my {rel} back, we keep missing each other these days.",
        "My {rel} swears by {app} for staying organised.",
        "Got a parcel from my {rel} today, no idea what's in it yet.",
        "My {rel} recommended {show}, so it's on my list.",
        "Had a long video call with my {rel} last night, mostly about {sport}.",
        "My {rel} and I have a running joke about terrible puns.",
        "My {rel} thinks I work too much, which is rich coming from someone who answers emails at midnight.",
        "My {rel} lent me {book} and I feel guilty I haven't started it.",
        "My {rel} sent a photo of a {dish} that looked amazing, now I'm hungry.",
        "My {rel} asked me to help choose a {item}, apparently I'm the family expert now.",
        "My {rel} has been binge-watching documentaries about {city} all week.",
        "Wedding season again: my {rel} has three invitations already and no outfit.",
        "My {rel} says the housing market where they live is completely mad.",
        "It was my {rel} who got me into {music_genre} in the first place.",
        "My {rel} never remembers anyone's birthday, including their own.",
    ],
    "job": [
        "That job advert wanted ten years of experience for a junior role.",
        "Good job I checked the forecast before heading out.",
        "A friend just quit her job to travel for a year, very jealous.",
        "Is it normal to feel tired after a job interview even if it went well?",
        "The job of cleaning the oven keeps getting pushed to next week.",
    ],
    "work": [
        "Work has been nonstop since {weekday}.",
        "The wifi at work dropped out three times today.",
        "Does anyone actually enjoy work drinks?",
        "I'm trying not to check work email after seven.",
    ],
    "car": [
        "The car park at the supermarket was rammed today.",
        "Someone's car alarm went off three times last night.",
        "Is it cheaper to rent a car or get the train for a weekend away?",
        "A car splashed me at the crossing this morning, soaked.",
        "Car insurance renewal letters are pure fiction.",
        "A friend is selling her car and asked me to write the advert, ha.",
        "The car wash on the ring road has a queue round the block on Sundays.",
    ],
    "doctor": [
        "The doctor's waiting room still had magazines from years ago.",
        "A friend of mine is training to be a doctor and never sleeps.",
        "The doctor on that hospital drama is so unrealistic.",
        "Getting a doctor's appointment round here takes weeks.",
        "My colleague found out her doctor went to school with her dad.",
    ],
    "allergic": [
        "A colleague is allergic to cats, so no office pets for us.",
        "Can you become allergic to things as an adult?",
        "The hay fever season this year is brutal, everyone at work is sneezing.",
        "Half the guests at the party had some kind of food allergy, catering was a puzzle.",
        "Apparently you can be allergic to the cold, which sounds made up.",
    ],
    "office": [
        "The office coffee machine broke again.",
        "Everyone was back in the office today for the all-hands.",
        "They're repainting the office, so we're all at home this week.",
        "The office plants are dying and nobody admits to owning them.",
        "The office heating is either off or tropical, nothing in between.",
        "Someone in the office microwaved fish again.",
    ],
    "bike": [
        "Someone left a bike locked to our railings for weeks now.",
        "Do bike lanes actually reduce traffic?",
        "The bike racks at the station are always full.",
        "A bike courier nearly took me out on the pavement.",
        "The city bike hire scheme doubled its prices.",
    ],
    "commute": [
        "The commute home was chaos because of the storm.",
        "Podcasts make any commute bearable.",
        "Half my team has a longer commute than me and they still arrive first.",
        "The trains were cancelled so everyone's commute took forever.",
    ],
    "grandmother": [
        "My grandmother still sends birthday cards with cash inside.",
        "Found a photo of my grandmother as a teenager, she looked so cool.",
        "My grandmother's old radio still works, amazingly.",
        "My grandmother has discovered voice notes and sends ten a day.",
        "My grandmother beat everyone at cards again at the weekend.",
        "My grandmother's garden is still the best on her street.",
    ],
    "dish": [
        "The dishwasher broke, so it's every dish by hand.",
        "What side dish goes with a roast?",
        "Whose turn is it to do the dishes, honestly.",
        "The satellite dish on our building blew loose in the wind.",
    ],
    "instrument": [
        "Which instrument is supposed to be easiest for adults to pick up?",
        "The dashboard instrument lights on the bus were flashing all the way home.",
        "A busker outside the station plays some instrument I'd never seen before.",
        "Is it too late to learn an instrument at my age, or is that a myth?",
    ],
    "learn": [
        "I'm trying to learn to touch type properly.",
        "You learn something new every day, apparently.",
        "The kids next door are learning to play the recorder, badly.",
        "I learned the hard way to save my work more often.",
    ],
    "gym": [
        "The gym was packed after New Year, as always.",
        "There's a new gym opening where the old bank used to be.",
        "Do I really need special gym shoes or are trainers fine?",
        "A colleague lives at the gym, she goes twice a day.",
        "Why do gym playlists all sound the same?",
    ],
    "join": [
        "Should I join the street's group chat or is it all complaints about bins?",
        "Three new people joined the team this week.",
        "They asked if I'd join the social committee at work, I panicked and said maybe.",
        "Joined a call ten minutes late because my laptop decided to update.",
    ],
    "birthday": [
        "It's a colleague's birthday on Friday and I'm in charge of the card.",
        "What's a good birthday present for a ten-year-old?",
        "A neighbour's kid had a birthday party with a bouncy castle in the garden.",
        "Birthday cards are so expensive now.",
    ],
    "book": [
        "Can you help me book a table for six on Saturday?",
        "I booked the train tickets already, finally.",
        "Our running club meets on Wednesdays now.",
        "The book shop on the corner is closing down, so sad.",
        "The club night downstairs kept us up until three.",
        "Booked a dentist appointment, finally being an adult.",
    ],
    "language": [
        "The body language in that interview was so awkward.",
        "What's the most spoken language in the world?",
        "The language in that report was so full of jargon I gave up.",
        "Kids pick up a language so much faster than adults.",
    ],
    "flat": [
        "I had a flat tyre on the way home.",
        "The new cafe downstairs does a decent flat white apparently.",
        "The lemonade had gone completely flat.",
        "A friend is flat hunting and the viewings sound grim.",
        "The flat above us is being renovated, drilling every morning.",
        "That joke fell completely flat in the meeting.",
    ],
    "company": [
        "The company newsletter was mostly about parking this month.",
        "That phone company keeps calling me about an upgrade.",
        "A big company is moving into the old brewery building.",
        "Company-wide emails with reply-all are my nightmare.",
    ],
    "marathon": [
        "I watched the marathon on TV, those people are machines.",
        "Half the street was without power on Tuesday.",
        "That meeting was a marathon, three hours.",
        "A colleague is running a marathon for charity, I sponsored her.",
        "We had a film marathon on Sunday and didn't move from the sofa.",
    ],
    "order": [
        "My online order still hasn't arrived.",
        "The usual crowd was late to the meeting again.",
        "Can you put these tasks in a sensible order?",
        "The takeaway got our order completely wrong.",
    ],
    "cafe": [
        "The cafe by the station has the slowest wifi in the world.",
        "A new cafe opened where the launderette used to be.",
        "Cafe prices are getting out of hand.",
    ],
    "coffee": [
        "The new coffee place has a forty-minute queue.",
        "Spilled coffee on my keyboard, everything is sticky.",
        "Is coffee actually dehydrating or is that a myth?",
        "The office coffee tastes like burnt toast.",
        "Somebody at work brought in fancy coffee beans and it's a whole event.",
    ],
    "houseplant": [
        "Is it true houseplants clean the air?",
        "First time I've seen frost on the car this year.",
        "A colleague brought in cuttings from her houseplants for everyone.",
        "The garden centre had a houseplant sale and it was carnage.",
    ],
    "wedding": [
        "Went to a colleague's wedding on Saturday, the speeches were endless.",
        "Why are wedding gifts so expensive these days?",
        "Someone was having their wedding photos taken in the park, lovely.",
        "A wedding band was rehearsing next door all afternoon.",
    ],
    "team": [
        "Our team supported the product launch all weekend.",
        "The team lunch was surprisingly fun.",
        "My five-a-side team lost again, we're hopeless.",
        "The pub quiz team needs a better name.",
    ],
    "supported": [
        "The old laptop isn't supported by the new software.",
        "Everyone supported the idea of a four-day week, management did not.",
    ],
    "diet": [
        "Is the Mediterranean diet actually backed by evidence?",
        "My news diet is way too heavy lately.",
        "Every diet article contradicts the one before it.",
        "A colleague is following some diet where he only eats after noon.",
    ],
    "phone": [
        "My phone battery dies by lunchtime.",
        "I hate phone calls, why can't everything be a message?",
        "Dropped my phone in the sink, it survived somehow.",
        "Phone screens are so big now they don't fit in pockets.",
        "Left my phone at home today and felt weirdly free.",
    ],
    "anniversary": [
        "It's the company's tenth anniversary, there's a party on Friday.",
        "The anniversary edition of that album is out.",
        "My parents' anniversary dinner is at the same place every year.",
    ],
    "hobby": [
        "A colleague turned her hobby of baking into a side business.",
        "Is it weird to have a hobby you never tell anyone about?",
        "Everyone's new hobby seems to be sourdough again.",
    ],
    "hurt": [
        "My {body_part} feels stiff after sitting all day.",
        "That comment hurt a bit, not going to lie.",
        "A friend hurt her {body_part} skiing and is on crutches.",
        "Sitting on the floor for that long made my {body_part} ache.",
    ],
    "rewatch": [
        "Which series do you think is worth a rewatch?",
        "Winter tyres, worth it or not?",
        "Winter always makes me want soup every day.",
        "I could rewatch the first season of {show} forever.",
        "Every movie night ends with us arguing about what to pick.",
    ],
    "movie": [
        "The movie they showed on the flight was so bad it was good.",
        "Movie trailers give away the whole plot these days.",
        "A movie crew was filming on our street, it was chaos.",
    ],
    "volunteer": [
        "They asked for volunteers to organise the summer party.",
        "Never volunteer first in a meeting, lesson learned.",
        "The park clean-up needs volunteers on Sunday.",
    ],
    "town": [
        "The town centre is all roadworks at the moment.",
        "My tomatoes grew like mad on the balcony.",
        "The next town over has a much better market.",
        "The town council wants to turn the car park into a square.",
    ],
    "live": [
        "Is there any live music on this weekend?",
        "I could honestly live on pasta.",
        "Watching the live coverage of the election, it's chaos.",
        "Live comedy is so much better than the TV version.",
        "Some people live on four hours of sleep, I don't know how.",
    ],
    "title": [
        "What should I title my presentation?",
        "The title of that song escapes me.",
        "Job titles in tech make no sense to me.",
    ],
    "longest": [
        "That was the longest meeting of my life.",
        "Can you help me run through my slides for tomorrow?",
        "My run of bad luck with trains continues.",
        "The longest queue in the supermarket is always mine.",
        "The printer has run out of toner again.",
    ],
    "rent": [
        "Renting a van for the move costs a fortune.",
        "Can you rent e-bikes by the hour around here?",
        "A friend's rent went up again, it's absurd out there.",
    ],
    "goal": [
        "Our team missed its quarterly goal by a hair.",
        "What a goal in the match last night!",
        "Is it better to set small goals or one big one?",
    ],
    "bed": [
        "The flower bed out front is full of weeds.",
        "Is it worth buying a more expensive bed frame?",
        "The cat next door sleeps in our flower bed.",
        "Everyone at work looks like they need to go back to bed.",
    ],
    "membership": [
        "My museum membership renewal came through.",
        "The membership fee for the allotment society went up.",
        "Do those warehouse club memberships actually save money?",
    ],
    "manager": [
        "The shop manager was really helpful with my return.",
        "Is a password manager actually safe?",
        "My manager cancelled our one-to-one again.",
        "The new manager at the cafe changed the menu.",
    ],
    "pet": [
        "My neighbour's pet parrot says hello to everyone.",
        "Pet insurance seems like a scam, doesn't it?",
        "The pet shop on the high street has a cat that sleeps in the window.",
        "A colleague brings his pet to video calls every day.",
    ],
    "trip": [
        "I tripped on the stairs at work, nothing broken.",
        "The school trip our neighbours organised got cancelled.",
        "Is a road trip with friends a good idea or a recipe for arguments?",
        "A colleague just came back from a trip to {country} with a suitcase full of snacks.",
    ],
    "repair": [
        "The lift in our building is under repair again.",
        "Is it worth repairing an old laptop or just replacing it?",
        "The road repairs outside have been going on for a month.",
    ],
    "finished": [
        "Finally finished the quarterly report.",
        "Finished the jigsaw puzzle after three weeks!",
        "They finished the roadworks, only two months late.",
    ],
    "race": [
        "The race for the top job at work is heating up.",
        "My heart was racing before the presentation.",
        "The horse racing was on in the pub and everyone was shouting.",
    ],
    "stay": [
        "We might stay in tonight and order food.",
        "Stay tuned, I'll tell you how it goes.",
        "Hotels want a two-night minimum stay at weekends now.",
    ],
    "course": [
        "Of course I forgot my umbrella again.",
        "I do most of my shopping online these days.",
        "The golf course near us is being turned into a park.",
        "The main course was great, dessert less so.",
    ],
    "furniture": [
        "The furniture shop delivery window is seven to seven, useless.",
        "Garden furniture is weirdly expensive this year.",
        "Someone left perfectly good furniture out on the street.",
    ],
    "holiday": [
        "Saved a bit by switching energy provider.",
        "Bank holiday traffic was a nightmare.",
        "Half the office is on holiday so it's very quiet.",
    ],
    "recipe": [
        "Can you try to keep the answer short?",
        "Two deadlines on the same day is a recipe for disaster.",
        "My flatmate tried a new recipe and set off the smoke alarm.",
        "Recipe blogs with a life story before the ingredients drive me mad.",
    ],
    "restaurant": [
        "The restaurant near work closed down.",
        "Why do restaurant menus have so many pages now?",
        "A new restaurant opened on our street with a queue outside every night.",
    ],
    "cinema": [
        "The cinema near us is turning into flats.",
        "Cinema snacks cost more than the ticket these days.",
        "The old cinema in town is showing classics on Sundays now.",
    ],
    "hike": [
        "They hiked the price of oat milk again.",
        "The hiking boots in the sale are all tiny sizes.",
        "A hiking group passed our house at seven in the morning, singing.",
    ],
    "splurge": [
        "I'm trying not to splurge before payday.",
        "Is a splurge on good headphones ever regretted?",
    ],
    "exhibition": [
        "The exhibition centre is hosting a car show this month.",
        "I keep meaning to visit the castle but never do.",
        "The school is putting on an art exhibition by the kids.",
    ],
    "party": [
        "Party conference season on the news is exhausting.",
        "The neighbours had a party until two in the morning.",
        "Dinner was cereal tonight, no shame.",
        "There's a leaving party at work on Friday.",
    ],
    "match": [
        "None of my socks match, I need to sort the drawer.",
        "Does this tie match a navy suit?",
        "The match was on in every pub, couldn't hear myself think.",
    ],
}

# Near misses: other people's news or other senses that share two or more of a question's
# words with its evidence (the hard distractors of LongMemEval-style sets).
NEAR: dict[str, list[str]] = {
    "f_rel_job": [
        "My {rel} has been working from home these days and is going a bit stir crazy.",
        "My {rel} asked what I actually do for work, and I couldn't explain it in one sentence.",
        "My {rel}'s new neighbour does something in finance, works crazy hours these days.",
    ],
    "f_car": [
        "A colleague ended up getting a car with a cassette player, it's ancient.",
        "My neighbour's car ended up getting towed from outside the school.",
        "Is it worth getting a car at all when you live in the city?",
    ],
    "f_allergy": [
        "The doctor on the radio said lots of people think they're allergic to things when it's really an intolerance.",
        "A friend's doctor found out she's allergic to plasters, of all things.",
        "The doctor at my colleague's check-up found nothing, she was almost disappointed.",
    ],
    "f_commute": [
        "A colleague rides an e-scooter to the office and arrives looking terrified.",
        "It takes ages to get to the office when the ring road is closed.",
        "The office is moving further out, which is going to make everyone's ride longer.",
    ],
    "f_grandma": [
        "My grandmother says every dish tastes better the next day.",
        "My grandmother thinks any dish without butter is a sad dish.",
        "This dish reminds me of a cafe we went to years ago.",
    ],
    "f_instrument": [
        "The kid downstairs is learning an instrument, I think it's the trumpet, at seven in the morning.",
        "A colleague is learning to play an instrument for her wedding, very ambitious.",
        "What's the easiest instrument to play for someone with no rhythm?",
    ],
    "f_gym_join": [
        "A friend joined the gym on {street} and says it's always packed.",
        "The gym at work is free but nobody ever joined, it's full of boxes.",
        "Joined a gym class by mistake that turned out to be for marathon runners.",
    ],
    "f_birthday": [
        "My {rel}'s friend is having a birthday party at the bowling alley.",
        "My {rel} asked what I want for my birthday and I had no idea.",
        "My {rel} always bakes the birthday cakes in our family.",
    ],
    "f_book_club": [
        "A colleague's book club is mostly wine and gossip, she admits it.",
        "The book club at the library is reading something about whales, apparently.",
        "Our running club started a book swap on the bench by the door.",
    ],
    "f_language": [
        "A colleague has been studying a language on the train every day for a year.",
        "Which language is the hardest for English speakers to study?",
        "My neighbour's kids have been studying sign language at school.",
    ],
    "f_flat": [
        "A new block of flats is going up in {area}, all glass.",
        "A friend is looking for a new flat and every neighbourhood seems to cost the same.",
        "Our neighbourhood group says the flat above the bakery is finally let.",
    ],
    "f_employer": [
        "Three people from my old company are joining a startup together.",
        "A company near us is joining the four-day week trial.",
        "A colleague is joining another team in the company next month.",
    ],
    "f_half": [
        "A colleague is doing the {city} half marathon for charity, she's terrified.",
        "Half marathon training plans all look the same to me.",
        "How fast do people usually run a half marathon, out of interest?",
    ],
    "f_cafe": [
        "The cafe got my colleague's order wrong three days in a row.",
        "Usually the cafe downstairs is quiet, but today the queue was out the door.",
        "What do people even order at a cafe that only does matcha?",
    ],
    "f_houseplant": [
        "A colleague bought her first houseplant and it's already dead.",
        "The first thing my friend bought for his new place was a giant houseplant.",
        "Is a cactus really the easiest first houseplant?",
    ],
    "f_wedding": [
        "My {rel} went to a friend's wedding in {city} and came back exhausted.",
        "My {rel} is going to be a bridesmaid at a wedding abroad, lots of planning.",
        "My {rel} said the last wedding they went to had a ceilidh, sounds fun.",
    ],
    "f_team": [
        "Our team at work supported the charity bake sale, I ate most of it.",
        "Since I was little I've been terrible at any sport with a ball.",
        "My nephew's team has supported him through a tough season.",
    ],
    "f_diet": [
        "Is anyone still following that diet where you only eat before six?",
        "A colleague is following a diet that involves a lot of eggs, the office smells.",
        "I've been following a lot of diet accounts online and they all contradict each other.",
    ],
    "f_phone": [
        "A friend ended up buying two phones by accident.",
        "Buying a phone in a shop is a two-hour ordeal now.",
        "My neighbour ended up buying a flip phone to use the internet less.",
    ],
    "f_anniversary": [
        "Our friends are going to {country} for their anniversary, jealous.",
        "My parents are going back to where they met for their anniversary.",
        "Where do people usually go for an anniversary that isn't a restaurant?",
    ],
    "f_hobby": [
        "Everyone at work seems to take up a new hobby in January.",
        "Take it from me, knitting is not a relaxing hobby.",
        "A colleague's hobby is collecting old maps, he brought one in.",
    ],
    "f_injury": [
        "A friend hurt her {body_part} falling off a ladder.",
        "How do people hurt their {body_part} just sleeping funny?",
        "My colleague hurt his {body_part} at the climbing wall.",
    ],
    "f_film": [
        "A friend rewatches the same Christmas movie every winter, without fail.",
        "Which movie would you rewatch if you could only pick one?",
        "Every winter the cinema shows the same old movie and it still sells out.",
    ],
    "f_volunteer": [
        "My colleague volunteers at the animal shelter and keeps trying to recruit me.",
        "Where do people find volunteer roles that fit around work?",
        "The museum needs volunteer guides at weekends.",
    ],
    "f_hometown": [
        "I'd love to grow vegetables if the town had more allotments.",
        "The town where my colleague grew up has one shop and three pubs.",
        "Small towns seem to grow faster than cities these days.",
    ],
    "u_rel_city": [
        "My {rel} wants to live somewhere warmer one day.",
        "My {rel}'s friends all live in the same street, it's like a sitcom.",
        "My {rel} says renting where they live now is a nightmare.",
    ],
    "u_title": [
        "Everyone's job title changed in the reorg except the people who asked for it.",
        "A colleague's job title is so long it doesn't fit on her badge.",
        "What's a job title that sounds important but means nothing?",
    ],
    "u_longest_run": [
        "A colleague did his longest run ever on Saturday and won't stop talking about it.",
        "The longest run of rain this year was eleven days, apparently.",
        "I've done the longest meeting of my career today, four hours.",
    ],
    "u_rent": [
        "How much rent do people pay for a place with a garden round here?",
        "Friends of ours pay rent to their own parents, which sounds awkward.",
        "The landlord's agent said rent is paid by standing order only.",
    ],
    "u_reading_goal": [
        "A friend set a reading goal of a hundred books, madness.",
        "My goal for the weekend is reading on the sofa and nothing else.",
        "Is a reading goal motivating or does it ruin reading?",
    ],
    "u_bedtime": [
        "What time do kids go to bed these days? The neighbours' are up at ten.",
        "My flatmate goes to bed at the same time as me but is always more tired.",
        "Is there a best time to go to bed, or is that all nonsense?",
    ],
    "u_gym_plan": [
        "My colleague cancelled her gym membership after two visits.",
        "Gym membership contracts are designed to be impossible to leave.",
        "Do you get a discount on gym membership through work?",
    ],
    "u_manager": [
        "A friend's manager sends emails at four in the morning.",
        "Who is the manager of that football club now? I lose track.",
        "The shop manager says the delivery is on its way.",
    ],
    "u_car": [
        "My neighbour drives a tiny car and parks it in the most impossible spots.",
        "What car do you drive when you have five kids, a minibus?",
        "Would a car club be cheaper than owning one if I only drive at weekends?",
    ],
    "u_coffee": [
        "My manager has about six coffees a day, I don't know how.",
        "How many coffees a day is too many, medically speaking?",
        "The cafe gives a free coffee per day if you bring your own cup.",
    ],
    "m_pets": [
        "The neighbours have so many pets I've lost count.",
        "How many pets can you have in a rented flat, legally?",
        "My colleague's kids want more pets, she's holding out.",
    ],
    "m_trips": [
        "A colleague has taken three trips to {country} already this year.",
        "Which countries are best for a first trip abroad with kids?",
        "My parents have taken trips to more countries since retiring than in their whole lives.",
    ],
    "m_concerts": [
        "A friend has seen every band on the festival line-up live at least once.",
        "Bands sound so different live compared with the album.",
        "Which bands are worth seeing live, in your opinion?",
    ],
    "m_bike": [
        "A colleague spent a fortune on bike repairs after a pothole.",
        "The bike repairs stall at the market is closing down.",
        "How much do people usually spend on bike repairs in a year?",
    ],
    "m_books": [
        "A colleague finished three books on her holiday.",
        "I've recently been buying books faster than I read them, oops.",
        "Finished books go on the top shelf, unfinished ones go in the pile of shame.",
    ],
    "m_races": [
        "The office has done charity races for years.",
        "How many races do people do before they stop getting nervous?",
        "The horse races were on every screen in the pub.",
    ],
    "m_visitors": [
        "My neighbour's parents come to stay every Christmas, for a month.",
        "Who comes to stay in a house that small? Apparently six people.",
        "Friends of ours have people come to stay almost every weekend.",
    ],
    "m_courses": [
        "Online courses with certificates are everywhere now.",
        "A colleague is taking three online courses at once, no idea how.",
        "Which online courses are actually worth taking for a career change?",
    ],
    "m_furniture": [
        "Our neighbours bought so much furniture the van couldn't fit it.",
        "Flat-pack furniture we bought years ago is still going strong.",
        "People who have bought vintage furniture always talk about it.",
    ],
    "m_savings": [
        "A friend saved for two years for a holiday in {country}.",
        "How much have people usually saved by thirty? The articles make me feel bad.",
        "The holiday club at work saved a fortune with a group booking.",
    ],
    "t_recipe": [
        "My flatmate wants to try a recipe from a cookbook she got for her birthday.",
        "Should I try a recipe with fewer ingredients when I'm tired?",
        "A colleague tried a recipe from a viral video and it went badly.",
    ],
    "t_restaurant": [
        "Which restaurant would you go to for a first date?",
        "Friends of ours go to the same restaurant every Friday.",
        "We were going to go to that new restaurant but it was fully booked.",
    ],
    "t_cinema": [
        "What's worth seeing at the cinema this month?",
        "A friend went to see the same film at the cinema three times.",
        "You can see old classics at the cinema on Sunday mornings now.",
    ],
    "t_hike": [
        "Friends of ours go hiking every weekend whatever the weather.",
        "Where do people go hiking near here without a car?",
        "We talked about going hiking but it never happened.",
    ],
    "t_splurge": [
        "A colleague splurged on a designer bag and now regrets it.",
        "What's the best thing you'd splurge on if you had to choose?",
        "It feels like everyone splurges on something silly before Christmas.",
    ],
    "t_exhibition": [
        "A friend wants to visit the exhibition everyone's posting about.",
        "The exhibition at the library is worth a visit if you're passing.",
        "School groups visit the exhibition on weekday mornings, so go late.",
    ],
    "t_party": [
        "What do people cook for a dinner party when half the guests are vegetarian?",
        "The neighbours' dinner party went on until two.",
        "A friend's dinner party had a theme and I didn't dress up, awkward.",
    ],
    "t_match": [
        "A colleague goes to every home match, rain or shine.",
        "Which match is on TV tonight?",
        "We nearly went to the match but the tickets were silly money.",
    ],
}


# --------------------------------------------------------------------------------------------
# Fact types. Each returns a dict:
#   group: exclusive key (one fact per group per conversation)
#   statements: evidence statement texts, in the order they are told
#   question, answer, mood, dkeys (lexical distractor keys), fixed (slot values for distractors)
#   events (temporal only): statements of the same kind of event, first is the evidence
# --------------------------------------------------------------------------------------------

JOBS = [
    ("nurse", "children's hospital"), ("pastry chef", "French bakery"),
    ("architect", "small design studio"), ("paramedic", "ambulance station"),
    ("data analyst", "renewable energy firm"), ("primary school teacher", "village school"),
    ("bike mechanic", "repair co-op"), ("sound engineer", "recording studio"),
    ("florist", "flower market stall"), ("pharmacist", "late-night pharmacy"),
    ("translator", "publishing house"), ("carpenter", "boat yard"),
]
RELS = [
    "sister", "brother", "cousin", "aunt", "uncle", "niece", "nephew", "best friend",
    "flatmate", "godmother",
]
REL_GENDER = {
    "sister": "f", "aunt": "f", "niece": "f", "godmother": "f",
    "brother": "m", "uncle": "m", "nephew": "m",
}
FEMALE = [
    "Laura", "Priya", "Aisha", "Sofia", "Mei", "Hannah", "Chloe", "Nadia", "Ines", "Rosa", "Amara",
    "Yuki", "Grace", "Zara", "Elena", "Ruth", "Maya", "Clara", "Freya", "Lena", "Nora", "Greta",
]
MALE = [
    "Marco", "Tom", "Daniel", "Ben", "Lucas", "Omar", "Jonas", "Ethan", "Kofi", "Felix", "Leo",
    "Mateo", "Oscar", "Theo", "Ivan", "Raj", "Hugo", "Tariq",
]
COLORS = ["red", "dark blue", "silver", "white", "green", "grey", "black"]
CARS = [
    "Toyota Yaris", "VW Golf", "Kia Niro", "Renault Clio", "Mazda 3", "Honda Jazz",
    "Hyundai Kona", "Ford Focus", "Skoda Fabia", "Fiat 500", "Peugeot 208", "Nissan Leaf",
]
ALLERGENS = [
    ("tree nuts", "pesto"), ("shellfish", "prawn curry"), ("sesame", "hummus"),
    ("kiwi", "fruit salad"), ("mustard", "salad dressing"), ("celery", "stock cubes"),
]
GRANDMA_DISHES = [
    "pierogi", "goulash", "bread pudding", "lasagne", "chicken soup with dumplings",
    "apple strudel", "paella", "moussaka", "jollof rice", "rice pudding", "cabbage rolls",
]
INSTRUMENTS = ["cello", "saxophone", "piano", "ukulele", "violin", "drums", "trumpet", "clarinet"]
GYMS = ["Ironworks", "Pulse Fitness", "the Forge", "Peak Performance", "Urban Strength", "the Foundry"]
STREETS = ["Mill Road", "Station Street", "Kings Parade", "Elm Avenue", "Harbour Lane", "Canal Walk"]
LANGUAGES = ["Portuguese", "Japanese", "Italian", "Korean", "Dutch", "Greek", "Turkish", "Polish", "Swedish"]
AREAS = ["Riverside", "Old Town", "Northfield", "the Canal Quarter", "Southgate", "Hillcrest", "Westbrook", "Eastgate"]
COMPANIES = [
    "Brightwave", "Northwind Analytics", "Cobalt Health", "Tidewater Labs", "Kestrel Logistics",
    "Juniper Energy", "Halcyon Games", "Meridian Bank",
]
ROLES = ["product manager", "data engineer", "UX researcher", "operations lead", "account manager", "QA engineer"]
HM_TIMES = ["1:52", "1:47", "2:05", "1:58", "2:11", "1:44", "2:02"]
CAFES = ["Bean There", "the Copper Pot", "Little Fox", "Common Ground", "the Daily Grind", "Two Sparrows"]
DRINKS = ["oat flat white", "cortado", "iced americano", "chai latte", "double espresso", "matcha latte", "mocha"]
PLANTS = ["monstera", "pothos", "snake plant", "fiddle-leaf fig", "peace lily", "calathea", "rubber plant"]
TEAMS = ["Arsenal", "Celtic", "Benfica", "Ajax", "Everton", "Sevilla", "Napoli", "Leeds United", "Boca Juniors"]
DIETS = ["low-FODMAP", "Mediterranean", "high-protein", "low-sugar", "gluten-free"]
PHONES = ["Pixel 9", "iPhone 16", "Galaxy S25", "Fairphone 5", "Nothing Phone 3"]
GETAWAYS = ["the Amalfi coast", "Lake Bled", "the Scottish Highlands", "Crete", "Kyoto", "the Dolomites", "Madeira", "Cornwall"]
HOBBIES = ["pottery", "bouldering", "birdwatching", "woodworking", "watercolour painting", "sea swimming", "calligraphy"]
INJURY_SPORTS = ["five-a-side", "basketball", "netball", "tennis", "volleyball"]
CHARITIES = ["the food bank", "a cat rescue", "the community garden", "a literacy charity", "the hospice shop"]
TOWNS = ["Whitby", "Tenby", "Hexham", "Ludlow", "Keswick", "Rye", "Falmouth", "Oban"]
TOWN_GEO = ["by the sea", "on the edge of the moors", "next to a big lake", "in a river valley"]
FILMS = ["Paper Moons", "The Hollow Field", "Seven Winters", "Blue Monsoon", "Red Meridian", "Small Hours"]
ROLE_LADDERS = [
    ("junior analyst", "senior analyst"), ("associate", "team lead"),
    ("software engineer", "senior engineer"), ("project coordinator", "programme manager"),
    ("account executive", "head of accounts"),
]
PLANS = ["off-peak", "basic", "all-access", "weekend-only", "premium", "classes-only"]
OLD_CARS = ["Vauxhall Corsa", "Ford Fiesta", "VW Polo", "Volvo V40", "Citroen C3"]
ANIMALS = [
    "rescue greyhound", "tabby kitten", "guinea pig", "border collie puppy", "rabbit",
    "ginger cat", "beagle", "tortoise",
]
PET_NAMES = ["Biscuit", "Pepper", "Mochi", "Juniper", "Pickle", "Waffles", "Olive", "Bramble", "Nacho", "Pixel"]
TRIP_DETAIL = [
    "the food alone was worth it", "it rained every day but we loved it",
    "I'm still recovering from the early flights", "we walked about twenty kilometres a day",
    "the people were so friendly", "I already want to go back",
]
BIKE_PARTS = ["gears", "brakes", "back wheel", "chain", "front tyre", "headset", "pedals"]
BIKE_PRICES = [35, 48, 60, 85, 120, 25, 70]
OPINIONS = [
    "loved the ending", "it was slower than I expected", "couldn't put it down",
    "the middle dragged a bit", "really moving", "very funny in places",
]
RACES = ["Riverside 10k", "Parkland Trail 10k", "Harbour 10k", "Night Run 10k", "Bridge-to-Bridge 10k", "Castle 10k"]
SUBJECTS = [
    "data visualisation", "bookkeeping", "first aid", "photography", "UX design",
    "creative writing", "beekeeping", "public speaking",
]
FURNITURE = ["sofa", "bookcase", "dining table", "desk", "wardrobe", "armchair", "bed frame", "chest of drawers"]
SAVINGS = [100, 150, 200, 250, 300, 400]
RECIPES = [
    "beef rendang", "mushroom stroganoff", "miso salmon", "lemon drizzle cake", "falafel",
    "ramen from scratch", "chicken katsu", "spinach gnocchi", "pad thai", "pumpkin risotto",
    "banana bread", "fish tacos",
]
VERDICTS = ["turned out great", "a bit of a disaster", "surprisingly easy", "will definitely make again", "too salty but fun"]
RESTAURANTS = [
    ("Casa Lina", "Spanish"), ("The Green Fig", "Lebanese"), ("Sakura House", "Japanese"),
    ("Olive & Thyme", "Greek"), ("El Faro", "Mexican"), ("Bombay Brasserie", "Indian"),
    ("Le Petit Jardin", "French"), ("Blue Lotus", "Thai"), ("Trattoria Nonna", "Italian"),
]
TRAILS = [
    "the Ridge Trail", "Kinder Scout", "the Seven Sisters cliffs", "Helvellyn", "the Cheviot",
    "the Malvern Hills", "Pen y Fan", "the Quiraing",
    "Cadair Idris", "Ben Lomond",
]
GADGETS = [
    "espresso machine", "e-reader", "pair of noise-cancelling headphones", "robot vacuum",
    "smartwatch", "standing desk", "film camera", "projector",
    "coffee grinder", "bread maker",
]
EXHIBITS = [
    "Hokusai prints", "Bauhaus design", "Roman Britain", "ocean photography", "Viking treasures",
    "medieval maps", "Art Deco posters", "ancient Egypt",
    "Japanese ceramics", "space exploration",
]
MUSEUMS = ["city museum", "modern art gallery", "science museum", "national library"]
PARTY_DISHES = [
    "a huge lasagne", "a Moroccan lamb tagine", "paella", "a vegetable biryani", "beef wellington",
    "a Thai green curry", "a whole baked salmon", "slow-roast pork shoulder", "a mezze spread",
]
MATCH_TEAMS = ["United", "City", "Rovers", "Athletic", "Wanderers", "Albion", "Town", "County", "Harriers"]
SCORES = ["a nil-nil snoozefest", "a 3-2 thriller", "a late winner", "a penalty shootout", "a 4-0 thrashing"]
V.update(street=STREETS, area=AREAS)  # slots of some near misses


def pick(rng: random.Random, seq, used: set | None = None):
    """A choice from seq, avoiding values in `used` when possible (and recording it)."""
    options = [x for x in seq if used is None or x not in used]
    value = rng.choice(options or list(seq))
    if used is not None:
        used.add(value)
    return value


class FactContext:
    """Per-conversation pools so facts of one conversation never collide."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: dict[str, set] = {}

    def take(self, key: str, seq):
        return pick(self.rng, seq, self.used.setdefault(key, set()))

    def rel(self):
        return self.take("rel", RELS)

    def name(self, gender: str = ""):
        pool = {"f": FEMALE, "m": MALE}.get(gender, V["name"])
        return self.take("name", pool)

    def rel_name(self):
        rel = self.rel()
        return rel, self.name(REL_GENDER.get(rel, ""))


def month_day(rng: random.Random) -> str:
    return f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"


# ---- single ----

def f_rel_job(c: FactContext):
    rel, name = c.rel_name()
    job, place = c.rng.choice(JOBS)
    art = "an" if job[0] in "aeiou" else "a"
    s = c.rng.choice([
        f"my {rel} {name} just started a new job as {art} {job} at a {place}",
        f"{name}, my {rel}, got hired as {art} {job} at a {place} last week",
    ])
    return dict(group=f"rel:{rel}", statements=[s], question=f"What does my {rel} do for work these days?",
                answer=f"{name} works as {art} {job} at a {place}", mood="pos", dkeys=["rel", "job", "work"],
                fixed={"rel": rel})


def f_car(c: FactContext):
    color, car = c.rng.choice(COLORS), c.rng.choice(CARS)
    s = f"I finally traded in my old hatchback for a {color} {car}, the first new car I've ever owned"
    return dict(group="car", statements=[s], question="What car did I end up getting?",
                answer=f"a {color} {car}", mood="pos", dkeys=["car"], fixed={})


def f_allergy(c: FactContext):
    allergen, food = c.rng.choice(ALLERGENS)
    s = f"I got my test results back and the doctor says I'm allergic to {allergen}, so no more {food} for me"
    return dict(group="allergy", statements=[s], question="What did the doctor find out I'm allergic to?",
                answer=allergen, mood="neg", dkeys=["doctor", "allergic"], fixed={})


def f_commute(c: FactContext):
    n = c.rng.choice([18, 22, 25, 30, 35, 40])
    s = f"I've started cycling to the office, it takes me about {n} minutes door to door"
    return dict(group="commute", statements=[s], question="How long does my ride to the office take?",
                answer=f"about {n} minutes by bike", mood="pos", dkeys=["office", "bike", "commute"], fixed={})


def f_grandma(c: FactContext):
    dish = c.rng.choice(GRANDMA_DISHES)
    s = f"my grandmother used to make {dish} every Sunday when I was a kid, I still crave it when it's cold"
    return dict(group="grandmother", statements=[s], question="Which dish reminds me of my grandmother?",
                answer=dish, mood="pos", dkeys=["grandmother", "dish"], fixed={})


def f_instrument(c: FactContext):
    inst = c.rng.choice(INSTRUMENTS)
    s = f"I signed up for {inst} lessons on Thursday evenings, I've always wanted to learn an instrument"
    return dict(group="instrument", statements=[s], question="What instrument am I learning to play?",
                answer=inst, mood="pos", dkeys=["instrument", "learn"], fixed={})


def f_gym_join(c: FactContext):
    gym, street = c.rng.choice(GYMS), c.rng.choice(STREETS)
    s = f"I finally joined a gym, {gym} on {street}, going three mornings a week before work"
    return dict(group="gym", statements=[s], question="What's the name of the gym I joined?",
                answer=f"{gym} on {street}", mood="pos", dkeys=["gym", "join"], fixed={})


def f_birthday(c: FactContext):
    rel, name = c.rel_name()
    md = month_day(c.rng)
    s = f"my {rel} {name}'s birthday is on {md}, please don't let me forget it this time"
    return dict(group=f"rel:{rel}", statements=[s], question=f"When is my {rel}'s birthday?",
                answer=md, mood="neu", dkeys=["rel", "birthday"], fixed={"rel": rel})


def f_book_club(c: FactContext):
    book, author = c.rng.choice(V["book"]), c.rng.choice(V["author"])
    s = f"our book club picked {book} by {author} for next month, it's over five hundred pages"
    return dict(group="book_club", statements=[s], question="What is my book club reading at the moment?",
                answer=f"{book} by {author}", mood="neu", dkeys=["book"], fixed={})


def f_language(c: FactContext):
    lang = c.rng.choice(LANGUAGES)
    s = f"I've been practising {lang} every morning with an app, it's a tough language but I'm hooked"
    return dict(group="language", statements=[s], question="Which language have I been studying?",
                answer=lang, mood="pos", dkeys=["language"], fixed={})


def f_flat(c: FactContext):
    area = c.rng.choice(AREAS)
    s = f"we signed the lease on a flat in {area}, two bedrooms and a tiny balcony, moving in next month"
    return dict(group="flat", statements=[s], question="Which neighbourhood is our new flat in?",
                answer=area, mood="pos", dkeys=["flat"], fixed={})


def f_employer(c: FactContext):
    comp, role = c.rng.choice(COMPANIES), c.rng.choice(ROLES)
    s = f"I accepted the offer, I'm joining {comp} as a {role} after my notice period"
    return dict(group="employer", statements=[s], question="Which company am I joining?",
                answer=comp, mood="pos", dkeys=["join", "company"], fixed={})


def f_half(c: FactContext):
    city, t = c.rng.choice(V["city"]), c.rng.choice(HM_TIMES)
    s = f"I ran the {city} half marathon on Sunday and crossed the line in {t}, legs are destroyed"
    return dict(group="running", statements=[s], question="How fast did I do the half marathon?",
                answer=t, mood="pos", dkeys=["marathon"], fixed={})


def f_cafe(c: FactContext):
    cafe, drink = c.rng.choice(CAFES), c.rng.choice(DRINKS)
    s = f"my usual order at {cafe} is a {drink}, the barista starts making it when I walk in"
    return dict(group="cafe", statements=[s], question="What do I usually order at the cafe?",
                answer=drink, mood="neu", dkeys=["order", "coffee", "cafe"], fixed={})


def f_houseplant(c: FactContext):
    plant = c.rng.choice(PLANTS)
    s = f"I picked up a {plant} for the living room, my first real houseplant, fingers crossed"
    return dict(group="plant", statements=[s], question="What was the first houseplant I bought?",
                answer=plant, mood="pos", dkeys=["houseplant"], fixed={})


def f_wedding(c: FactContext):
    rel, name = c.rel_name()
    city, season = c.rng.choice(V["city"]), c.rng.choice(V["season"])
    s = f"my {rel} {name} is getting married in {city} next {season}, we all have to fly out"
    return dict(group=f"rel:{rel}", statements=[s], question=f"Where is my {rel}'s wedding going to be?",
                answer=city, mood="pos", dkeys=["rel", "wedding"], fixed={"rel": rel})


def f_team(c: FactContext):
    team = c.rng.choice(TEAMS)
    s = f"I've supported {team} since I was about six, my dad took me to my first game"
    return dict(group="team", statements=[s], question="Which team have I supported since I was little?",
                answer=team, mood="neu", dkeys=["supported", "team"], fixed={})


def f_diet(c: FactContext):
    diet = c.rng.choice(DIETS)
    s = f"I'm going to try a {diet} diet for the next few months, the dietitian thinks it could help"
    return dict(group="diet", statements=[s], question="What diet am I following?",
                answer=diet, mood="neu", dkeys=["diet"], fixed={})


def f_phone(c: FactContext):
    phone = c.rng.choice(PHONES)
    s = f"my new phone arrived today, I went with the {phone} in the end"
    return dict(group="phone", statements=[s], question="Which phone did I end up buying?",
                answer=phone, mood="pos", dkeys=["phone"], fixed={})


def f_anniversary(c: FactContext):
    place, n = c.rng.choice(GETAWAYS), c.rng.choice(["three", "four", "five"])
    s = f"we booked {n} nights in {place} for our anniversary, I can't wait"
    return dict(group="anniversary", statements=[s], question="Where are we going for our anniversary?",
                answer=place, mood="pos", dkeys=["anniversary"], fixed={})


def f_hobby(c: FactContext):
    hobby = c.rng.choice(HOBBIES)
    s = f"new hobby alert: I've taken up {hobby} at weekends and I'm weirdly obsessed"
    return dict(group="hobby", statements=[s], question="What hobby did I take up?",
                answer=hobby, mood="pos", dkeys=["hobby"], fixed={})


def f_injury(c: FactContext):
    part, sport = c.rng.choice(V["body_part"]), c.rng.choice(INJURY_SPORTS)
    s = f"I sprained my {part} playing {sport} on Saturday, it's swollen and purple"
    return dict(group="injury", statements=[s], question=f"How did I hurt my {part}?",
                answer=f"playing {sport}", mood="neg", dkeys=["hurt"], fixed={"body_part": part})


def f_film(c: FactContext):
    film = c.rng.choice(FILMS)
    s = f"{film} is still my all-time favourite film, I rewatch it every winter without fail"
    return dict(group="film", statements=[s], question="Which movie do I rewatch every winter?",
                answer=film, mood="neu", dkeys=["rewatch", "movie"], fixed={})


def f_volunteer(c: FactContext):
    charity = c.rng.choice(CHARITIES)
    s = f"I've started volunteering at {charity} on Saturday mornings, it's really grounding"
    return dict(group="volunteer", statements=[s], question="Where do I volunteer?",
                answer=charity, mood="pos", dkeys=["volunteer"], fixed={})


def f_hometown(c: FactContext):
    town, geo = c.rng.choice(TOWNS), c.rng.choice(TOWN_GEO)
    s = f"I grew up in {town}, a small town {geo}, and I still miss it sometimes"
    return dict(group="hometown", statements=[s], question="Which town did I grow up in?",
                answer=town, mood="neu", dkeys=["town"], fixed={})


SINGLE = [
    f_rel_job, f_car, f_allergy, f_commute, f_grandma, f_instrument, f_gym_join, f_birthday,
    f_book_club, f_language, f_flat, f_employer, f_half, f_cafe, f_houseplant, f_wedding, f_team,
    f_diet, f_phone, f_anniversary, f_hobby, f_injury, f_film, f_volunteer, f_hometown,
]

# ---- knowledge updates (evidence: both turns; the answer is the newer one) ----


def u_rel_city(c: FactContext):
    rel, name = c.rel_name()
    a, b = c.rng.sample(V["city"], 2)
    s1 = f"my {rel} {name} moved to {a} for work, still settling in slowly"
    s2 = f"{name} is on the move again, my {rel} just relocated to {b} for a better role"
    return dict(group=f"rel:{rel}", statements=[s1, s2], question=f"Where does my {rel} live now?",
                answer=b, mood="neu", dkeys=["rel", "live"], fixed={"rel": rel})


def u_title(c: FactContext):
    a, b = c.rng.choice(ROLE_LADDERS)
    s1 = f"I got my first promotion at work, my title is now {a}"
    s2 = f"promoted again, can you believe it, my new title is {b} from next month"
    return dict(group="title", statements=[s1, s2], question="What's my job title at the moment?",
                answer=b, mood="pos", dkeys=["title", "job"], fixed={})


def u_longest_run(c: FactContext):
    d1 = c.rng.randint(12, 17)
    d2 = d1 + c.rng.randint(4, 9)
    s1 = f"I did my longest run so far today, {d1} km along the river"
    s2 = f"new record: my longest run ever this morning, {d2} km, I'm shattered"
    return dict(group="running", statements=[s1, s2], question="What is the longest run I've done?",
                answer=f"{d2} km", mood="pos", dkeys=["longest"], fixed={})


def u_rent(c: FactContext):
    r1 = c.rng.choice([950, 1100, 1250, 1400])
    r2 = r1 + c.rng.choice([75, 100, 150])
    s1 = f"our rent is {r1} a month, which is steep but we love the place"
    s2 = f"the landlord just put the rent up to {r2} a month, not thrilled"
    return dict(group="rent", statements=[s1, s2], question="How much rent do we pay?",
                answer=f"{r2} a month", mood="neu", dkeys=["rent"], fixed={})


def u_reading_goal(c: FactContext):
    n1 = c.rng.choice([12, 15, 20, 24])
    n2 = n1 + c.rng.choice([5, 6, 10])
    s1 = f"I set myself a goal of {n1} books for the year"
    s2 = f"I'm already ahead, so I'm raising my reading goal to {n2} books"
    return dict(group="goal", statements=[s1, s2], question="What's my reading goal?",
                answer=f"{n2} books", mood="pos", dkeys=["goal", "book"], fixed={})


def u_bedtime(c: FactContext):
    t1, t2 = c.rng.choice([("11:30", "10:30"), ("midnight", "11"), ("11", "10:15"), ("half eleven", "ten")])
    s1 = f"I'm trying to get to bed by {t1} every night, wish me luck"
    s2 = f"new rule: I'm going to bed at {t2} now, {t1} just wasn't early enough"
    return dict(group="sleep", statements=[s1, s2], question="What time do I go to bed these days?",
                answer=t2, mood="neu", dkeys=["bed"], fixed={})


def u_gym_plan(c: FactContext):
    a, b = c.rng.sample(PLANS, 2)
    s1 = f"I'm on the {a} membership at my gym, it's fine for now"
    s2 = f"I switched my gym membership to {b}, it suits my schedule better"
    return dict(group="gym", statements=[s1, s2], question="Which gym membership do I have?",
                answer=b, mood="neu", dkeys=["gym", "membership"], fixed={})


def u_manager(c: FactContext):
    a, b = c.name(), c.name()
    s1 = f"my manager is {a}, pretty relaxed and good at shielding us from nonsense"
    s2 = f"big reorg at work, {b} is my new manager as of this week"
    return dict(group="manager", statements=[s1, s2], question="Who is my manager?",
                answer=b, mood="neu", dkeys=["manager"], fixed={})


def u_car(c: FactContext):
    a, b = c.rng.choice(OLD_CARS), c.rng.choice(CARS)
    s1 = f"I'm driving my dad's old {a} for now until I can afford something newer"
    s2 = f"I sold the {a} and got a {b}, loving the new car"
    return dict(group="car", statements=[s1, s2], question="What car do I drive?",
                answer=b, mood="pos", dkeys=["car"], fixed={})


def u_coffee(c: FactContext):
    a, b = c.rng.choice([("one", "four"), ("two", "five"), ("one", "three")])
    s1 = f"I'm down to {a} coffee{'' if a == 'one' else 's'} a day, proud of myself"
    s2 = f"deadline week, I'm back up to {b} coffees a day"
    return dict(group="coffee", statements=[s1, s2], question="How many coffees do I have per day?",
                answer=b, mood="neu", dkeys=["coffee"], fixed={})


UPDATE = [u_rel_city, u_title, u_longest_run, u_rent, u_reading_goal, u_bedtime, u_gym_plan, u_manager, u_car, u_coffee]

# ---- multi-session (evidence in 2-3 sessions; the answer aggregates) ----


def m_pets(c: FactContext):
    k = c.rng.choice([2, 3])
    animals = c.rng.sample(ANIMALS, k)
    names = c.rng.sample(PET_NAMES, k)
    st = [f"we adopted a {animals[0]} called {names[0]}, our first pet"]
    for a, n in zip(animals[1:], names[1:]):
        st.append(c.rng.choice([
            f"another pet joined the family this week: a {a} named {n}",
            f"we couldn't resist, there's a new pet in the house, a {a} called {n}",
        ]))
    return dict(group="pets", statements=st, question="How many pets do I have?",
                answer=f"{k}: " + ", ".join(names), mood="pos", dkeys=["pet"], fixed={})


def m_trips(c: FactContext):
    k = c.rng.choice([2, 3])
    countries = c.rng.sample(V["country"], k)
    st = [f"just got back from a trip to {x}, {c.rng.choice(TRIP_DETAIL)}" for x in countries]
    return dict(group="trips", statements=st, question="Which countries have I taken trips to?",
                answer=", ".join(countries), mood="fun", dkeys=["trip"], fixed={})


def m_concerts(c: FactContext):
    k = c.rng.choice([2, 3])
    bands = c.rng.sample(V["band"], k)
    st = [f"saw {b} live at {c.rng.choice(V['venue'])} last night, my ears are still ringing" for b in bands]
    return dict(group="concerts", statements=st, question="Which bands have I seen live?",
                answer=", ".join(bands), mood="fun", dkeys=["live"], fixed={})


def m_bike(c: FactContext):
    k = c.rng.choice([2, 3])
    parts = c.rng.sample(BIKE_PARTS, k)
    prices = c.rng.sample(BIKE_PRICES, k)
    st = [f"the bike shop charged me {p} pounds to sort out the {x}" for x, p in zip(parts, prices)]
    return dict(group="bike", statements=st, question="How much have I spent on bike repairs in total?",
                answer=f"{sum(prices)} pounds", mood="neg", dkeys=["bike", "repair"], fixed={})


def m_books(c: FactContext):
    k = c.rng.choice([2, 3])
    books = c.rng.sample(V["book"], k)
    st = [f"finished reading {b} by {c.rng.choice(V['author'])}, {c.rng.choice(OPINIONS)}" for b in books]
    return dict(group="finished_books", statements=st, question="Which books have I finished recently?",
                answer=", ".join(books), mood="neu", dkeys=["finished", "book"], fixed={})


def m_races(c: FactContext):
    k = c.rng.choice([2, 3])
    races = c.rng.sample(RACES, k)
    st = [f"did the {r} race on Sunday, {c.rng.choice(['new personal best', 'hard going in the wind', 'lovely course', 'survived it'])}" for r in races]
    return dict(group="running", statements=st, question="How many races have I done?",
                answer=f"{k}: " + ", ".join(races), mood="fun", dkeys=["race"], fixed={})


def m_visitors(c: FactContext):
    k = c.rng.choice([2, 3])
    people = [c.rel_name() for _ in range(k)]
    st = [f"my {r} {n} came to stay with us for the weekend, the spare room finally got used" for r, n in people]
    return dict(group="visitors", statements=st, question="Who has come to stay with me?",
                answer=", ".join(f"{n} ({r})" for r, n in people), mood="fun", dkeys=["stay"], fixed={})


def m_courses(c: FactContext):
    k = c.rng.choice([2, 3])
    subj = c.rng.sample(SUBJECTS, k)
    st = [f"I signed up for an online course on {s}, two evenings a week" for s in subj]
    return dict(group="courses", statements=st, question="Which online courses am I taking?",
                answer=", ".join(subj), mood="pos", dkeys=["course"], fixed={})


def m_furniture(c: FactContext):
    k = c.rng.choice([2, 3])
    items = c.rng.sample(FURNITURE, k)
    st = [f"more furniture for the place: we ordered a {i}, arriving in a fortnight" for i in items]
    return dict(group="furniture", statements=st, question="What furniture have we bought?",
                answer=", ".join(items), mood="neu", dkeys=["furniture"], fixed={})


def m_savings(c: FactContext):
    k = c.rng.choice([2, 3])
    amounts = c.rng.sample(SAVINGS, k)
    st = [f"put another {a} pounds into the holiday savings pot this month" for a in amounts]
    return dict(group="savings", statements=st, question="How much have I saved for the holiday so far?",
                answer=f"{sum(amounts)} pounds", mood="pos", dkeys=["holiday"], fixed={})


MULTI = [m_pets, m_trips, m_concerts, m_bike, m_books, m_races, m_visitors, m_courses, m_furniture, m_savings]

# ---- temporal (evidence in the named month; same kind of event in other months) ----


def t_recipe(c: FactContext):
    dishes = c.rng.sample(RECIPES, 7)
    ev = [f"tried a new recipe tonight, {d}, {c.rng.choice(VERDICTS)}" for d in dishes]
    return dict(group="t_cook", events=ev, question="What recipe did I try in {month}?",
                answers=dishes, mood="fun", dkeys=["recipe"], fixed={})


def t_restaurant(c: FactContext):
    rs = c.rng.sample(RESTAURANTS, 7)
    ev = [f"we had dinner at {r}, a {cu} restaurant near {c.rng.choice(AREAS)}, lovely evening" for r, cu in rs]
    return dict(group="t_restaurant", events=ev, question="Which restaurant did we go to in {month}?",
                answers=[r for r, _ in rs], mood="fun", dkeys=["restaurant"], fixed={})


def t_cinema(c: FactContext):
    ms = c.rng.sample(V["movie"], 7)
    ev = [f"went to the cinema to see {m}, {c.rng.choice(['the sound was incredible', 'not sure about the ending', 'worth it for the big screen', 'slept through the middle'])}" for m in ms]
    return dict(group="t_cinema", events=ev, question="What did I see at the cinema in {month}?",
                answers=ms, mood="fun", dkeys=["cinema"], fixed={})


def t_hike(c: FactContext):
    ts = c.rng.sample(TRAILS, 7)
    ev = [f"hiked {t} with {c.rng.choice(V['name'])} today, {c.rng.choice(['the views were unreal', 'wind nearly blew us off', 'knees are complaining', 'perfect weather'])}" for t in ts]
    return dict(group="t_hike", events=ev, question="Where did I go hiking in {month}?",
                answers=ts, mood="fun", dkeys=["hike"], fixed={})


def t_splurge(c: FactContext):
    gs = c.rng.sample(GADGETS, 7)
    ev = [f"I splurged on a {g}, {c.rng.choice(['no regrets so far', 'my bank account is crying', 'it was on offer at least', 'treat yourself, right'])}" for g in gs]
    return dict(group="t_splurge", events=ev, question="What did I splurge on in {month}?",
                answers=gs, mood="fun", dkeys=["splurge"], fixed={})


def t_exhibition(c: FactContext):
    xs = c.rng.sample(EXHIBITS, 7)
    ev = [f"visited the {x} exhibition at the {c.rng.choice(MUSEUMS)}, spent hours there" for x in xs]
    return dict(group="t_exhibition", events=ev, question="Which exhibition did I visit in {month}?",
                answers=xs, mood="fun", dkeys=["exhibition"], fixed={})


def t_party(c: FactContext):
    ds = c.rng.sample(PARTY_DISHES, 7)
    ev = [f"hosted a dinner party for {c.rng.choice(['six', 'eight', 'five'])} friends and cooked {d}" for d in ds]
    return dict(group="t_cook", events=ev, question="What did I cook for the dinner party in {month}?",
                answers=ds, mood="fun", dkeys=["party"], fixed={})


def t_match(c: FactContext):
    ts = c.rng.sample(MATCH_TEAMS, 7)
    ev = [f"went to the {t} match with {c.rng.choice(V['name'])}, {c.rng.choice(SCORES)}" for t in ts]
    return dict(group="t_match", events=ev, question="Which match did I go to in {month}?",
                answers=[f"the {t} match" for t in ts], mood="fun", dkeys=["match"], fixed={})


TEMPORAL = [t_recipe, t_restaurant, t_cinema, t_hike, t_splurge, t_exhibition, t_party, t_match]

# --------------------------------------------------------------------------------------------
# Text helpers
# --------------------------------------------------------------------------------------------

SLOT = re.compile(r"\{([a-z_]+?)(\d?)\}")


def cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def sentence(s: str) -> str:
    s = articles(cap(s.strip()))
    return s if s[-1:] in ".!?" else s + "."


def words(s: str) -> int:
    return len(s.split())


SUMMER_WEATHER = ["heatwave", "thunderstorm", "humid spell", "storm"]
WINTER_WEATHER = ["storm", "fog", "cold snap", "drizzle", "hailstorm", "wind", "frost"]


def articles(text: str) -> str:
    """'a apple' -> 'an apple' (not before 'one', 'u...' or 'eu...')."""
    return re.sub(r"\b([Aa]) (?=[aiAI]|[eE](?!u)|[oO](?!ne))", r"\1n ", text)


class Session:
    """One chat session: its current topic, the templates already used (never repeated within a
    session), and slot values bound once per session so the user and the assistant talk about
    the same things. A digit suffix ({ingredient2}) asks for a second, different value."""

    def __init__(self, rng: random.Random, when: dt.datetime):
        self.rng = rng
        self.when = when
        self.topics_left = list(TOPICS)
        rng.shuffle(self.topics_left)
        self.topic = self.topics_left.pop()
        self.used: set[str] = set()
        self.bound: dict[tuple[str, str], str] = {}

    def switch(self) -> None:
        if self.topics_left:
            self.topic = self.topics_left.pop()

    def left(self, kind: str) -> list[str]:
        return [t for t in TOPICS[self.topic][kind] if t not in self.used]

    def take(self, kind: str, pool: list[str] | None = None) -> str:
        """An unused template of `kind` from the current topic (or from `pool`), filled."""
        options = [t for t in (pool if pool is not None else TOPICS[self.topic][kind]) if t not in self.used]
        if not options:
            options = pool if pool is not None else TOPICS[self.topic][kind]
        t = self.rng.choice(options)
        self.used.add(t)
        return self.fill(t)

    def fill(self, template: str, fixed: dict | None = None) -> str:
        fixed = fixed or {}

        def rep(m: re.Match) -> str:
            base, suffix = m.group(1), m.group(2)
            if base in fixed:
                return fixed[base]
            key = (base, suffix)
            if key not in self.bound:
                taken = {v for (b, _), v in self.bound.items() if b == base}
                values = V[base]
                if base == "weather":
                    values = SUMMER_WEATHER if self.when.month in (6, 7, 8) else WINTER_WEATHER
                self.bound[key] = pick(self.rng, values, set(taken))
            return self.bound[key]

        return articles(SLOT.sub(rep, template))

    def greeting(self) -> str:
        extra = GREETING_MORNING if self.when.hour < 12 else GREETING_EVENING if self.when.hour >= 18 else []
        return self.rng.choice(GREETING + extra)


# --------------------------------------------------------------------------------------------
# Conversation generation
# --------------------------------------------------------------------------------------------

def session_dates(rng: random.Random, n: int) -> list[dt.date]:
    start = EARLIEST_START + dt.timedelta(days=rng.randint(0, 20))
    span = (END_DATE - start).days
    days = sorted(rng.sample(range(span + 1), n))
    # the last session close to the end of the period
    days[-1] = span - rng.randint(0, 3)
    days = sorted(set(days))
    while len(days) < n:  # (only if the adjustment above collided)
        d = rng.randint(0, span)
        if d not in days:
            days = sorted(days + [d])
    return [start + dt.timedelta(days=d) for d in days]


def plan_facts(rng: random.Random, n_sessions: int, dates: list[dt.date]):
    """Chooses fact instances and the sessions their statements go to.

    Returns the facts: dicts with category, question, answer, mood, dkeys (lexical distractor
    keys), near (near-miss templates), fixed (slot values for both) and
    slots = [(session, statement, is_evidence)] (temporal facts also plant the same kind of
    event in other months, with is_evidence false)."""
    ctx = FactContext(rng)
    groups: set[str] = set()
    facts = []
    load = [0] * n_sessions
    last = n_sessions - 1  # the final session holds no planted statement (it is recent context)

    def choose(pool, count):
        out = []
        order = pool[:]
        rng.shuffle(order)
        for fn in order:
            if len(out) == count:
                break
            f = fn(ctx)
            if f["group"] in groups:
                continue
            f["near"] = NEAR[fn.__name__]
            groups.add(f["group"])
            out.append(f)
        return out

    def free_session(lo: int, hi: int, exclude=()) -> int:
        options = [s for s in range(lo, hi + 1) if s not in exclude]
        best = min(load[s] for s in options)
        # prefer sessions with few planted statements, but keep some randomness
        cands = [s for s in options if load[s] <= best + 1]
        return rng.choice(cands)

    for f in choose(SINGLE, CATEGORY_COUNTS["single"]):
        s = free_session(0, last - 1)
        load[s] += 1
        facts.append(dict(category="single", question=f["question"], answer=f["answer"], mood=f["mood"],
                          dkeys=f["dkeys"], near=f["near"], fixed=f["fixed"], slots=[(s, f["statements"][0], True)]))
    for f in choose(UPDATE, CATEGORY_COUNTS["update"]):
        a = free_session(0, last - 11)
        b = free_session(a + 6, last - 1)
        load[a] += 1
        load[b] += 1
        facts.append(dict(category="update", question=f["question"], answer=f["answer"], mood=f["mood"],
                          dkeys=f["dkeys"], near=f["near"], fixed=f["fixed"],
                          slots=[(a, f["statements"][0], True), (b, f["statements"][1], True)]))
    for f in choose(MULTI, CATEGORY_COUNTS["multi"]):
        chosen: list[int] = []
        for _ in f["statements"]:
            s = free_session(0, last - 1, exclude=chosen)
            chosen.append(s)
        chosen.sort()
        for s in chosen:
            load[s] += 1
        facts.append(dict(category="multi", question=f["question"], answer=f["answer"], mood=f["mood"],
                          dkeys=f["dkeys"], near=f["near"], fixed=f["fixed"],
                          slots=[(s, st, True) for s, st in zip(chosen, f["statements"])]))
    for f in choose(TEMPORAL, CATEGORY_COUNTS["temporal"]):
        # Evidence month: December 2025 .. October 2026, so "in <Month>" names it unambiguously
        # (the most recent such month before the questions, asked in November 2026).
        eligible = [s for s in range(last) if dates[s] >= dt.date(2025, 12, 1)]
        ev = rng.choice(eligible)
        month = dates[ev].month
        others = [s for s in range(last) if dates[s].month != month]
        k = rng.randint(4, 6)
        # distractor events in distinct other months
        rng.shuffle(others)
        others.sort(key=lambda x: load[x])  # the least loaded sessions first, random among equals
        picked: list[int] = []
        months_used = {month}
        for s in others:
            if dates[s].month not in months_used:
                picked.append(s)
                months_used.add(dates[s].month)
            if len(picked) == k:
                break
        load[ev] += 1
        for s in picked:
            load[s] += 1
        slots = [(ev, f["events"][0], True)] + [(s, f["events"][i + 1], False) for i, s in enumerate(picked)]
        slots.sort(key=lambda x: x[0])
        facts.append(dict(category="temporal", question=f["question"].format(month=MONTHS[month - 1]),
                          answer=f["answers"][0], mood=f["mood"], dkeys=f["dkeys"], near=f["near"], fixed=f["fixed"],
                          slots=slots))
    return facts


SWITCH = ["Different question: ", "Unrelated: ", "Another thing. ", "Oh, and one more thing. ", "New topic. ", "", ""]
ASIDE = ["Side note: ", "Random, but ", "Ugh, ", "Funny thing: ", "Also, ", "Oh and "]
ACKS_USER = ["Thanks, that's useful.", "Makes sense.", "Okay, got it.", "Good point.",
             "Hmm, I hadn't thought of that.", "Perfect, thanks.", "Ha, fair enough.", "That helps."]


def user_turn(rng, sess: Session, first: bool, fact=None, distractors: list[str] = ()) -> str:
    """A user turn; may switch the session to a new topic (a new question)."""
    # (text, essential): optional parts are dropped from the end to stay within 60 words
    parts: list[tuple[str, bool]] = []
    new_question = first or len(sess.left("follow")) == 0 or rng.random() < 0.2
    if new_question and not first:
        sess.switch()

    def request() -> str:
        if first:
            return sess.take("ask")
        if new_question:
            return rng.choice(SWITCH) + sess.take("ask")
        return sess.take("follow")

    if first:
        g = sess.greeting()
        if g:
            parts.append((g, False))
    if fact is not None:
        statement, _mood = fact
        lead = rng.choice(LEAD_IN)
        # as long as other user turns: some chatter around the statement
        if rng.random() < 0.4:
            parts.append((sentence(sess.take("smalltalk", SMALLTALK)) if first else sess.take("ack", ACKS_USER), False))
        parts.append((sentence(lead + statement), True))
        if rng.random() < 0.8 or first:
            req = request()
            parts.append(((req if first or new_question else rng.choice(TRANSITION) + req), False))
        if rng.random() < 0.3:
            parts.append((sentence(sess.take("smalltalk", SMALLTALK)), False))
    else:
        if first and rng.random() < 0.45:
            parts.append((sentence(sess.take("smalltalk", SMALLTALK)), False))
        elif not first and not new_question and rng.random() < 0.3:
            parts.append((sess.take("ack", ACKS_USER), False))
        parts.append((request(), True))
    for d in distractors:
        at = 1 if (first and parts and not parts[0][1]) else 0
        if fact is None and rng.random() < 0.5:
            parts.insert(at, (d, True))
        else:
            parts.append((d, True))

    def join() -> str:
        return " ".join(p.strip() for p, _ in parts if p.strip())

    while words(join()) > 60:
        drop = [i for i, (_, essential) in enumerate(parts) if not essential]
        if not drop:
            drop = [i for i, (p, _) in enumerate(parts) if p in distractors]
            if not drop:
                break
        parts.pop(drop[-1])
    text = join()
    while words(text) < 10:
        text += " " + sess.take("follow")
    return text


def assistant_turn(rng, sess: Session, ack_mood: str | None) -> str:
    parts: list[str] = []
    if ack_mood:
        parts.append(rng.choice(ACK[ack_mood]))
    elif rng.random() < 0.6:
        parts.append(sess.take("open", ASSIST_OPEN))
    k = rng.randint(2, 5)
    for _ in range(k):
        if not sess.left("say") and len(parts) >= 2:
            break
        parts.append(sentence(sess.take("say")))
    if rng.random() < 0.4:
        parts.append(sess.take("close", ASSIST_CLOSE))
    text = " ".join(parts)
    while words(text) < 20:
        text += " " + sentence(sess.take("say"))
    while words(text) > 120 and len(parts) > 2:
        parts.pop(-1)
        text = " ".join(parts)
    return text


Q_PREFIX = [
    "Quick question before my meeting: ", "My memory is terrible this week. ",
    "Settle something for me. ", "For the family group chat: ", "Sorry, random one. ",
    "Help me out here, I should know this. ", "Writing in my journal and got stuck. ",
    "I was telling a friend about this at work today and went blank. ",
]
Q_SUFFIX = [
    " I feel like I told you at some point.", " Asking because it came up over dinner.",
    " It came up at work and I drew a blank.", " Trying to get my notes in order this weekend.",
    " A friend asked and I wasn't sure.",
]


# --------------------------------------------------------------------------------------------
# The natural question style (--style natural): the same facts and history, but each question
# is one of several paraphrases a person might write instead of the template: synonyms
# ("vehicle" for "car"), other word forms ("allergy" for "allergic"), indirect references ("the
# place I go three mornings a week"), and time named in other ways ("back in March", "eight
# months ago"). Written without looking at which words the engine matches; some share no
# content word with the evidence at all, as happens in real chats.
# --------------------------------------------------------------------------------------------

NATURAL_QUESTIONS: dict[str, list[str]] = {
    # single
    "What does my {rel} do for work these days?": [
        "What's my {rel}'s new job again?", "Where did my {rel} get hired, and doing what?",
        "Remind me what my {rel} is working as now."],
    "What car did I end up getting?": [
        "Which vehicle did I buy when I traded in the hatchback?", "What's the make of my new car?",
        "What am I driving since I bought something new?"],
    "What did the doctor find out I'm allergic to?": [
        "What did my allergy test show?", "Which food am I not supposed to eat because of my allergy?",
        "What did the tests say I react badly to?"],
    "How long does my ride to the office take?": [
        "How many minutes is my cycle to work?", "How long is my bike commute?",
        "What's my commute time now that I cycle in?"],
    "Which dish reminds me of my grandmother?": [
        "What did my gran cook for us on Sundays?", "What's the comfort food from my childhood I keep craving?",
        "Which of my grandma's recipes do I miss?"],
    "What instrument am I learning to play?": [
        "What are my Thursday evening lessons for?", "Which instrument did I sign up to learn?",
        "What music lessons am I taking?"],
    "What's the name of the gym I joined?": [
        "Where do I work out before work?", "Which gym did I sign up with?",
        "What's the place I go to three mornings a week called?"],
    "When is my {rel}'s birthday?": [
        "What date is my {rel}'s birthday?", "When should I send my {rel} a card?",
        "Which day must I not forget for my {rel}?"],
    "What is my book club reading at the moment?": [
        "What's the current book club pick?", "Which novel did the book club choose?",
        "What's the huge book we're reading for book club?"],
    "Which language have I been studying?": [
        "What language am I practising on that app?", "Which language am I learning every morning?",
        "What am I doing language lessons in?"],
    "Which neighbourhood is our new flat in?": [
        "Where's the flat we signed the lease on?", "What area are we moving to?",
        "Which part of town is our new place in?"],
    "Which company am I joining?": [
        "Who did I accept the job offer from?", "Where's my new job?",
        "What's the name of my next employer?"],
    "How fast did I do the half marathon?": [
        "What was my half marathon time?", "How long did the half take me?",
        "What was my finishing time in the race on Sunday, the half?"],
    "What do I usually order at the cafe?": [
        "What's my regular coffee order?", "What does the barista make for me when I walk in?",
        "What's my usual drink at the coffee shop?"],
    "What was the first houseplant I bought?": [
        "Which plant did I get for the living room?", "What was my first plant?",
        "What kind of houseplant do I have?"],
    "Where is my {rel}'s wedding going to be?": [
        "Where is my {rel} getting married?", "Which city do we have to fly to for the wedding?",
        "Where's the wedding we're all flying out for?"],
    "Which team have I supported since I was little?": [
        "Which club do I support?", "Who's my football team?",
        "What team did my dad take me to see as a kid?"],
    "What diet am I following?": [
        "What eating plan did the dietitian suggest?", "Which diet am I trying?",
        "What am I doing food-wise for the next few months?"],
    "Which phone did I end up buying?": [
        "What's my new phone?", "Which handset did I go with?", "What model of mobile did I get?"],
    "Where are we going for our anniversary?": [
        "Where did we book for the anniversary trip?", "Where are we spending our anniversary?",
        "What's the getaway we booked to celebrate our anniversary?"],
    "What hobby did I take up?": [
        "What's the new thing I do at weekends?", "Which hobby am I obsessed with lately?",
        "What have I been doing on weekends for fun?"],
    "How did I hurt my {part}?": [
        "What happened to my {part}?", "How did I injure my {part}?",
        "What sport was I playing when I sprained something?"],
    "Which movie do I rewatch every winter?": [
        "What's my all-time favourite film?", "Which film do I watch again each year?",
        "What's the film I can't go a winter without?"],
    "Where do I volunteer?": [
        "Where do I help out on Saturday mornings?", "Which charity do I do volunteering for?",
        "Where do I give my time for free?"],
    "Which town did I grow up in?": [
        "Where am I from originally?", "What's my hometown?", "Which small town was I raised in?"],
    # knowledge updates
    "Where does my {rel} live now?": [
        "Which city is my {rel} in these days?", "Where did my {rel} relocate to?",
        "Where has my {rel} moved to?"],
    "What's my job title at the moment?": [
        "What's my current role at work after the promotions?", "What's my position called now?",
        "What was I promoted to?"],
    "What is the longest run I've done?": [
        "What's my furthest distance running?", "How many km was my longest ever run?",
        "What's my distance record for a run?"],
    "How much rent do we pay?": [
        "What does the flat cost us every month?", "How much is our rent after the increase?",
        "What do we pay the landlord monthly?"],
    "What's my reading goal?": [
        "How many books am I aiming to read this year?", "What's my target for books this year?",
        "How many books did I set out to read?"],
    "What time do I go to bed these days?": [
        "What's my bedtime now?", "When am I trying to be asleep by?",
        "What time did I decide to go to sleep?"],
    "Which gym membership do I have?": [
        "What plan am I on at the gym?", "Which membership type did I switch to?",
        "What kind of gym pass do I have?"],
    "Who is my manager?": [
        "Who's my boss now?", "Who do I report to after the reorg?", "Who manages me these days?"],
    "What car do I drive?": [
        "What am I driving at the moment?", "What's my car now?",
        "Did I replace dad's old car, and with what?"],
    "How many coffees do I have per day?": [
        "How much coffee am I drinking daily?", "How many cups of coffee a day am I on?",
        "What's my caffeine intake like these days?"],
    # multi-session
    "How many pets do I have?": [
        "How many animals live with us?", "What are my pets called?",
        "List all the animals we've adopted."],
    "Which countries have I taken trips to?": [
        "Where have I travelled abroad?", "Which countries did I visit?",
        "What trips have I been on?"],
    "Which bands have I seen live?": [
        "What concerts have I been to?", "Which gigs have I gone to?",
        "What bands did I see perform?"],
    "How much have I spent on bike repairs in total?": [
        "What has the bike shop charged me altogether?", "How much did fixing my bicycle cost overall?",
        "What's the total I've paid to get my bike sorted?"],
    "Which books have I finished recently?": [
        "What have I read lately?", "Which novels did I get through?",
        "What books did I finish reading?"],
    "How many races have I done?": [
        "Which races have I run?", "How many running events have I taken part in?",
        "What races did I do on Sundays?"],
    "Who has come to stay with me?": [
        "Who has used our spare room?", "Which relatives stayed with us for a weekend?",
        "Who visited and stayed over?"],
    "Which online courses am I taking?": [
        "What am I studying in the evenings?", "Which courses did I sign up for?",
        "What online classes am I doing?"],
    "What furniture have we bought?": [
        "What did we order for the flat?", "Which pieces of furniture are we getting?",
        "What have we ordered for the place?"],
    "How much have I saved for the holiday so far?": [
        "What's in the holiday savings pot?", "How much money have I put aside for the trip?",
        "How much have I put towards our holiday?"],
    # temporal ({when}: the month named in one of several ways)
    "What recipe did I try in {month}?": [
        "What new dish did I cook {when}?", "Which recipe did I make {when}?",
        "What did I try cooking {when}?"],
    "Which restaurant did we go to in {month}?": [
        "Where did we eat out {when}?", "Which place did we have dinner at {when}?",
        "What restaurant did we try {when}?"],
    "What did I see at the cinema in {month}?": [
        "Which film did I watch at the cinema {when}?", "What movie did I go to see {when}?",
        "What did I catch at the pictures {when}?"],
    "Where did I go hiking in {month}?": [
        "Which trail did I hike {when}?", "Where did I go walking {when}?",
        "What hike did I do {when}?"],
    "What did I splurge on in {month}?": [
        "What did I treat myself to {when}?", "What expensive thing did I buy {when}?",
        "What did I splash out on {when}?"],
    "Which exhibition did I visit in {month}?": [
        "What exhibit did I see {when}?", "Which museum show did I go to {when}?",
        "What exhibition was it I went to {when}?"],
    "What did I cook for the dinner party in {month}?": [
        "What did I serve when I had friends over for dinner {when}?",
        "What was on the menu at my dinner party {when}?",
        "What did I make for the dinner I hosted {when}?"],
    "Which match did I go to in {month}?": [
        "Which game did I watch at the stadium {when}?", "What football match did I attend {when}?",
        "Who was playing at the match I went to {when}?"],
}

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve"]


def _template_regex(template: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", template)
    rx = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
    return re.compile(rx)


NATURAL_RX = [(_template_regex(t), alts) for t, alts in NATURAL_QUESTIONS.items()]


def natural_question(rng: random.Random, question: str) -> str:
    """One of the paraphrases of a (formatted) template question."""
    for rx, alts in NATURAL_RX:
        m = rx.fullmatch(question)
        if not m:
            continue
        slots = m.groupdict()
        alt = rng.choice(alts)
        if "month" in slots:
            month = MONTHS.index(slots["month"]) + 1
            # Months back from the question to the most recent such month before it.
            back = (QUERY_TIME.month - month) % 12 or 12
            ago = NUMBER_WORDS[back] if back < len(NUMBER_WORDS) else str(back)
            slots["when"] = rng.choice([
                f"in {slots['month']}", f"back in {slots['month']}", f"last {slots['month']}",
                f"{ago} months ago" if back > 1 else f"in {slots['month']}",
            ])
        return cap(alt.format(**slots))
    raise ValueError(f"no natural paraphrase for {question!r}")


def fmt_ts(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_conversation(seed: int, ci: int, style: str = "templated"):
    rng = random.Random(f"ctxgate-recall-{seed}-{ci}")
    # Its own generator, so the templated style stays byte-identical whatever this one draws.
    nrng = random.Random(f"ctxgate-recall-natural-{seed}-{ci}")
    conv = f"c{ci:02d}"
    n_sessions = rng.randint(38, 42)
    dates = session_dates(rng, n_sessions)
    facts = plan_facts(rng, n_sessions, dates)

    # statements planted per session: (fact index, statement, is_evidence, slot index)
    plants: dict[int, list[tuple[int, str, bool, int]]] = {}
    for fi, f in enumerate(facts):
        for si, (s, st, ev) in enumerate(f["slots"]):
            plants.setdefault(s, []).append((fi, st, ev, si))
    # Lexical distractors: 10-16 per fact (each template at most twice per conversation) and 4-6
    # near misses, in random sessions, using the fact's question words in unrelated contexts.
    distractors: dict[int, list[tuple[str, dict]]] = {}
    for f in facts:
        templates = [(key, t) for key in f["dkeys"] for t in DISTRACT[key]]
        rng.shuffle(templates)
        cycle = templates + templates
        for key_t in cycle[: min(rng.randint(10, 16), len(cycle))]:
            distractors.setdefault(rng.randrange(n_sessions), []).append((key_t[1], f["fixed"]))
        near = f["near"][:]
        rng.shuffle(near)
        for t in (near + near)[: rng.randint(4, 6)]:
            distractors.setdefault(rng.randrange(n_sessions), []).append((t, f["fixed"]))

    user = f"user{ci:02d}"
    messages = []
    evidence_ids: dict[tuple[int, int], str] = {}
    for s, day in enumerate(dates):
        t = dt.datetime(day.year, day.month, day.day, rng.randint(7, 21), rng.randint(0, 59),
                        rng.randint(0, 59), tzinfo=dt.timezone.utc)
        sess = Session(rng, t)
        here = plants.get(s, [])
        n_turns = max(rng.choice([8, 10, 12, 14, 16]), min(16, 2 * (len(here) + 2)))
        n_user = n_turns // 2
        assert len(here) <= n_user, (conv, s, len(here))
        # planted statements go to distinct user turns
        slots_for = dict(zip(rng.sample(range(n_user), min(len(here), n_user)), here))
        dis_for: dict[int, list[str]] = {}
        for template, fixed in distractors.get(s, []):
            free = [u for u in range(n_user) if len(dis_for.get(u, [])) < 3 and u not in slots_for]
            if not free:
                break
            u = rng.choice(free)
            text = sentence(sess.fill(template, fixed))
            if rng.random() < 0.35:
                text = rng.choice(ASIDE) + text[:1].lower() + text[1:] if not text.startswith(("I ", "I'")) else rng.choice(ASIDE) + text
            dis_for.setdefault(u, []).append(text)
        ack = None
        for turn in range(n_turns):
            if turn % 2 == 0:
                u = turn // 2
                planted = slots_for.get(u)
                fact = None
                if planted is not None:
                    fi, st, ev, si = planted
                    fact = (st, facts[fi]["mood"])
                    ack = facts[fi]["mood"] if rng.random() < 0.8 else None
                else:
                    ack = None
                text = user_turn(rng, sess, turn == 0, fact, dis_for.get(u, []))
                role, sender = "user", user
            else:
                text = assistant_turn(rng, sess, ack)
                role, sender = "assistant", "assistant"
                ack = None
            mid = f"{conv}-s{s:02d}-t{turn:02d}"
            if turn % 2 == 0 and planted is not None:
                fi, st, ev, si = planted
                if ev:
                    evidence_ids[(fi, si)] = mid
                # the statement must be in the turn verbatim
                assert articles(st).split(",")[0].lower()[:30] in text.lower(), (mid, st, text)
            messages.append({
                "id": mid, "conversation": conv, "sender": sender, "role": role, "text": text,
                "timestamp": fmt_ts(t), "reply_to": None, "source_type": None,
            })
            t += dt.timedelta(seconds=rng.randint(25, 240) if role == "user" else rng.randint(40, 400))

    queries, evidence, categories, answers = [], {}, {}, {}
    order = list(range(len(facts)))
    rng.shuffle(order)
    for qi, fi in enumerate(order):
        f = facts[fi]
        qid = f"{conv}-q{qi:02d}"
        ids = [evidence_ids[(fi, si)] for si, (_, _, ev) in enumerate(f["slots"]) if ev]
        assert ids, f
        text = f["question"] if style == "templated" else natural_question(nrng, f["question"])
        # Half the questions come wrapped in chat noise, as real incoming messages do (no time
        # words, which would change what a temporal question asks about).
        if rng.random() < 0.5:
            if rng.random() < 0.6:
                text = rng.choice(Q_PREFIX) + text
            else:
                text = text + rng.choice(Q_SUFFIX)
        queries.append({"id": qid, "conversation": conv, "text": text,
                        "timestamp": fmt_ts(QUERY_TIME + dt.timedelta(minutes=7 * qi + ci))})
        evidence[qid] = ids
        categories[qid] = f["category"]
        answers[qid] = articles(f["answer"])
    return messages, queries, evidence, categories, answers


# --------------------------------------------------------------------------------------------
# Diagnostics: how lexical is the set? (approximation of the engine's tokenisation)
# --------------------------------------------------------------------------------------------

STOP = set("""a about above after again all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just me
more most my myself no nor not now of off on once only or other our ours ourselves out over own
same she should so some such than that the their theirs them themselves then there these they this
those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves tell remember know said say told think please thanks
hi hello ok okay also get got let like make want need one much many way thing things something
anything really well yes yeah last ago""".split())


def stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s", "ly"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            break
    return w.rstrip("e")


def content(text: str) -> set[str]:
    return {stem(w) for w in re.split(r"[^0-9a-z]+", text.lower()) if len(w) >= 2 and w not in STOP}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--conversations", type=int, default=12)
    ap.add_argument("--style", choices=["templated", "natural"], default="templated",
                    help="questions as templates (default) or as natural paraphrases")
    args = ap.parse_args()

    all_msgs, all_q, evidence, categories, answers = [], [], {}, {}, {}
    for ci in range(args.conversations):
        m, q, e, c, a = generate_conversation(args.seed, ci, args.style)
        all_msgs.extend(m)
        all_q.extend(q)
        evidence.update(e)
        categories.update(c)
        answers.update(a)
    # Chronological order across conversations (stable: within a conversation turns never tie).
    all_msgs.sort(key=lambda m: m["timestamp"])

    args.outdir.mkdir(parents=True, exist_ok=True)
    with open(args.outdir / "history.jsonl", "w", encoding="utf-8") as fh:
        for m in all_msgs:
            fh.write(json.dumps(m, ensure_ascii=False) + "\n")
    with open(args.outdir / "queries.jsonl", "w", encoding="utf-8") as fh:
        for q in all_q:
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    for name, obj in (("evidence.json", evidence), ("categories.json", categories), ("answers.json", answers)):
        with open(args.outdir / name, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=1, ensure_ascii=False, sort_keys=True)
            fh.write("\n")

    # Summary on stderr.
    by_id = {m["id"]: m for m in all_msgs}
    n_conv = args.conversations
    chars = sum(len(m["text"]) for m in all_msgs)
    uw = [words(m["text"]) for m in all_msgs if m["role"] == "user"]
    aw = [words(m["text"]) for m in all_msgs if m["role"] == "assistant"]
    cats: dict[str, int] = {}
    for c in categories.values():
        cats[c] = cats.get(c, 0) + 1
    overlaps = []
    zero = 0
    for q in all_q:
        qt = content(q["text"])
        for eid in evidence[q["id"]]:
            n = len(qt & content(by_id[eid]["text"]))
            overlaps.append(n)
            zero += n == 0
    print(
        f"{len(all_msgs)} messages in {n_conv} conversations (~{len(all_msgs) / n_conv:.0f} each, "
        f"~{chars / 4 / n_conv:,.0f} tokens each by chars/4); {len(all_q)} queries {cats}\n"
        f"user turns {min(uw)}-{max(uw)} words (mean {sum(uw) / len(uw):.0f}), "
        f"assistant turns {min(aw)}-{max(aw)} words (mean {sum(aw) / len(aw):.0f}); "
        f"question/evidence shared content words: mean {sum(overlaps) / len(overlaps):.2f}, "
        f"{zero} evidence turns share none",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
