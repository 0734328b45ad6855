-- Deterministic sqlite3 workload for runsel's programs test: 100,000 rows in :memory:, indexes, sorts, updates.
CREATE TABLE items(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, payload BLOB);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
INSERT INTO items SELECT x, (x * 7919) % 997, printf('item-%06d-%x', (x * 48271) % 100003, x * 31), zeroblob(x % 200) FROM n;
CREATE INDEX items_grp ON items(grp);
CREATE INDEX items_name ON items(name);
SELECT count(*), sum(grp), sum(length(name)), sum(length(payload)) FROM items;
SELECT grp, count(*), min(id), max(id) FROM items GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 5;
SELECT name FROM items ORDER BY name DESC LIMIT 3;
UPDATE items SET name = name || '-updated', payload = zeroblob(length(payload) * 2) WHERE id % 3 = 0;
DELETE FROM items WHERE id % 5 = 0;
SELECT count(*), sum(length(name)), sum(length(payload)) FROM items;
CREATE TABLE summary AS SELECT grp, group_concat(substr(name, 6, 6), ',') AS names FROM items GROUP BY grp;
SELECT count(*), sum(length(names)) FROM summary;
SELECT grp, length(names) FROM summary ORDER BY length(names) DESC, grp LIMIT 3;
SELECT a.grp, count(*) FROM items a JOIN summary b ON a.grp = b.grp WHERE a.id % 100 = 7 GROUP BY a.grp ORDER BY a.grp LIMIT 3;
DROP INDEX items_name;
SELECT count(*) FROM items WHERE name LIKE 'item-00%';
